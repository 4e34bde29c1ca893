package command

import "github.com/cairn-es/cairn/internal/failpoint"

// hit marks a failpoint (see internal/failpoint). This package's
// failpoints sit in generic functions, which are compiled where they are
// instantiated, in the user's package; Go inlines a call to this
// package's hit there, but not a direct call to failpoint.Hit, whose body
// that package's compilation does not see (checked with go1.26:
// -gcflags=-m). Through hit, a build without the failpoints tag keeps no
// call at all.
func hit(name string) { failpoint.Hit(name) }
