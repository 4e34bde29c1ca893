// Command serve runs the protocol-level KurrentDB test server for the
// tests of the cairn binary (cmd/cairn), a module of its own that cannot
// import this module's internal packages: it prints the server's
// connection string on one line of stdout, then serves until its stdin
// closes (the test ends) or it is killed.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/cairn-es/cairn/eventstore/kurrentdb/internal/testserver"
)

func main() {
	srv, err := testserver.Start(testserver.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "serve:", err)
		os.Exit(1)
	}
	fmt.Println(srv.URL())
	_, _ = io.Copy(io.Discard, os.Stdin)
	srv.Close()
}
