//go:build unix

package sqlite

import (
	"os"
	"syscall"
)

// folderWritable reports whether this process may create files in dir. It
// asks the kernel (access(2)), which knows about read-only file systems,
// rather than reading the mode bits.
func folderWritable(dir string) error {
	const wOK, xOK = 0x2, 0x1
	if err := syscall.Access(dir, wOK|xOK); err != nil {
		return &os.PathError{Op: "access", Path: dir, Err: err}
	}
	return nil
}
