//go:build !race

package projectiontest

const raceEnabled = false
