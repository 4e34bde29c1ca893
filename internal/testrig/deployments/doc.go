// Package deployments holds the two-deployments test of issue 14 (item 4):
// two deployments of the reservation flow, each with its Sale saga runner
// and its read model, share one store and its leases, while handlers take
// longer than the lease TTL. It has tests only; see deployments_test.go
// and docs/reliability.md.
package deployments
