// Package testrig is where Cairn's own test rigs live, each in a package
// below it: the reservation flow that the saga tests, the simulation and
// the crash tests run (reservation, flowtest), the deterministic saga
// simulation (sim), the crash matrix, the two-deployments test and the
// soak (crashmatrix, deployments, soak), a throwaway PostgreSQL server for
// tests (pgtest), the cairn command line's golden fixtures and cases,
// which package cli and the cairn binary (cmd/cairn, on KurrentDB) share
// (clitest), and the checker of the documentation's Go blocks
// (doccheck). They are not API.
//
// The packages directly under internal/ are leaves that the library uses
// (backoff, clip, failpoint, ...). The rigs sit under internal/ too, so
// that no other module can import them, but apart, so that the one rule
// of the layering reads off the path: tests may import a rig, the library
// (any non-test file of a package outside examples/, internal/testrig/ and
// internal/tools/, the test kits included) never does. .ci/layering checks
// it in make lint. A rig may import an example: the reservation rig runs
// the reservation example's orders and seat reservations
// (examples/reservation/domain) rather than a copy of them.
package testrig
