// Package datadir gives Cairn's examples a folder for their SQLite file:
// the one named with -data, created when missing, or a temporary one that
// goes when the example ends. It is no part of Cairn; it only keeps this
// chore out of the examples' own code.
package datadir

import "os"

// Open returns dir, created when missing; or, when dir is empty, a new
// temporary folder whose name starts with pattern. remove deletes a
// temporary folder and leaves a named one alone.
func Open(dir, pattern string) (path string, remove func(), err error) {
	if dir != "" {
		return dir, func() {}, os.MkdirAll(dir, 0o755)
	}
	tmp, err := os.MkdirTemp("", pattern)
	if err != nil {
		return "", nil, err
	}
	return tmp, func() { _ = os.RemoveAll(tmp) }, nil
}
