//go:build !cairnfailpoints || !unix

package failpoint

import "os"

// Enabled reports whether this build can crash at a failpoint: built with
// the tag cairnfailpoints on a Unix system.
const Enabled = false

// Hit marks the failpoint name. Without the tag cairnfailpoints it does
// nothing, and the compiler inlines it away.
func Hit(name string) {}

// Hits returns how many times name was hit in this process: always 0
// without the tag cairnfailpoints.
func Hits(name string) int64 { return 0 }

// Armed returns the failpoint that [Env] arms. Without the tag
// cairnfailpoints none can be, so a set [Env] is a [*SpecError]: a crash
// test whose child was built without the tag would otherwise wait for a
// crash that never comes.
func Armed() (Spec, error) {
	if v := os.Getenv(Env); v != "" {
		return Spec{}, &SpecError{Value: v, Reason: "this binary was built without -tags " + Tag + " (or not for Unix), so no failpoint fires"}
	}
	return Spec{}, nil
}
