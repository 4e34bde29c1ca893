//go:build !unix

package sqlite

// folderWritable cannot ask this system cheaply whether dir is writable;
// SQLite reports it when it tries (see fileErr).
func folderWritable(string) error { return nil }
