//go:build race

package sim

// raceEnabled scales the seeds of `go test -race` down (see
// testSeeds and testOrders): the race detector makes each run some ten
// times slower.
const raceEnabled = true
