// Package crashmatrix holds the crash matrix of issue 14: for each
// failpoint (internal/failpoint), store and seed, a child process runs the
// reservation flow with the seed's orders and kills itself with SIGKILL at
// the seed's hit of the failpoint; a clean child then drains what is left,
// and internal/testrig/flowtest.Check counts every order's effects. It has tests
// only; see crashmatrix_test.go and docs/reliability.md.
package crashmatrix
