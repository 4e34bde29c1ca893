// Command depaudit checks that every dependency of the module in the
// current directory is at or above the minimum version that
// minimums.txt pins for it, with the reason (a published advisory, say).
// `make lint` runs it. It reads the versions the build selects from
// `go list -m -json all`, so it needs no network beyond the module proxy.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"

	"golang.org/x/mod/semver"
)

// minimum is one line of minimums.txt.
type minimum struct {
	Module, Version, Reason string
	Line                    int
}

// module is what `go list -m -json` says of one module.
type module struct {
	Path    string
	Version string
	Main    bool
	Replace *module
}

func main() {
	list := "internal/tools/depaudit/minimums.txt"
	if len(os.Args) > 1 {
		list = os.Args[1]
	}
	dirs := os.Args[min(2, len(os.Args)):]
	if len(dirs) == 0 {
		dirs = []string{"."}
	}
	f, err := os.Open(list)
	if err != nil {
		fail(err)
	}
	mins, err := parseMinimums(f)
	_ = f.Close()
	if err != nil {
		fail(fmt.Errorf("%s: %w", list, err))
	}
	builds := make([]build, len(dirs))
	for i, dir := range dirs {
		cmd := exec.Command("go", "list", "-m", "-json", "all")
		cmd.Dir = dir
		out, err := cmd.Output()
		if err != nil {
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				err = fmt.Errorf("go list -m -json all in %s: %w: %s", dir, err, exit.Stderr)
			}
			fail(err)
		}
		mods, err := parseModules(bytes.NewReader(out))
		if err != nil {
			fail(err)
		}
		builds[i] = build{Dir: dir, Modules: mods}
	}
	if problems := audit(mins, builds...); len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintln(os.Stderr, "depaudit:", p)
		}
		os.Exit(1)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "depaudit:", err)
	os.Exit(2)
}

// parseMinimums reads lines of "module minimum reason...", skipping blank
// lines and # comments.
func parseMinimums(r io.Reader) ([]minimum, error) {
	var out []minimum
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 3 {
			return nil, fmt.Errorf("line %d: want module, minimum version and reason, got %q", n, line)
		}
		if !semver.IsValid(fields[1]) {
			return nil, fmt.Errorf("line %d: %q is not a semantic version", n, fields[1])
		}
		out = append(out, minimum{Module: fields[0], Version: fields[1], Reason: strings.Join(fields[2:], " "), Line: n})
	}
	return out, sc.Err()
}

// parseModules decodes the stream of JSON objects `go list -m -json`
// writes.
func parseModules(r io.Reader) ([]module, error) {
	var out []module
	dec := json.NewDecoder(r)
	for {
		var m module
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading go list's output: %w", err)
		}
		out = append(out, m)
	}
}

// build is the module graph of one module of the repository (Cairn and
// its KurrentDB store are two), as the go command in Dir selects it.
type build struct {
	Dir     string
	Modules []module
}

// audit returns a problem for each pinned module that a build selects
// below its minimum (a replacement's version counts), and for each pin of
// a module that no build has any more, so that the list stays true.
func audit(mins []minimum, builds ...build) []string {
	selected := make([]map[string]string, len(builds))
	for i, b := range builds {
		selected[i] = make(map[string]string, len(b.Modules))
		for _, m := range b.Modules {
			v := m.Version
			if m.Replace != nil && m.Replace.Version != "" {
				v = m.Replace.Version
			}
			selected[i][m.Path] = v
		}
	}
	var problems []string
	for _, min := range mins {
		used := false
		for i, b := range builds {
			v, ok := selected[i][min.Module]
			used = used || ok
			in := ""
			if len(builds) > 1 {
				in = " in " + b.Dir
			}
			switch {
			case !ok:
			case v == "":
				problems = append(problems, fmt.Sprintf("%s has no version%s (a local replacement?): it must be at least %s (%s)", min.Module, in, min.Version, min.Reason))
			case semver.Compare(v, min.Version) < 0:
				problems = append(problems, fmt.Sprintf("%s is at %s%s, below %s: %s", min.Module, v, in, min.Version, min.Reason))
			}
		}
		if !used {
			problems = append(problems, fmt.Sprintf("line %d pins %s, which the build no longer uses: remove the line", min.Line, min.Module))
		}
	}
	return problems
}
