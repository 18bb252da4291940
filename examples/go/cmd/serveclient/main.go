// Command serveclient runs a few commands through one `sandbox serve` process, concurrently,
// and prints what happened to each: an allowed command, one the filter stops, a bad request.
//
//	go run ./cmd/serveclient -sandbox /path/to/sandbox
package main

import (
	"flag"
	"fmt"
	"os"
	"sync"

	"example.com/sandbox-clients/sandbox"
)

func main() {
	sandboxPath := flag.String("sandbox", "sandbox", "the sandbox binary")
	flag.Parse()
	c, err := sandbox.Start(*sandboxPath, "--max-concurrent", "2")
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting sandbox serve:", err)
		os.Exit(1)
	}
	requests := map[string]sandbox.Request{
		"echo":   {Argv: []string{"/bin/echo", "hello from the sandbox"}},
		"socket": {Argv: []string{"/usr/bin/python3", "-c", "import socket; socket.socket()"}, Profile: "minimal"},
		"bad":    {Argv: []string{"relative/program"}},
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	lines := map[string]string{}
	for name, req := range requests {
		wg.Add(1)
		go func(name string, req sandbox.Request) {
			defer wg.Done()
			r, err := c.Run(req)
			var text string
			switch {
			case err != nil:
				text = "refused: " + err.Error()
			case r.Violation != nil:
				text = fmt.Sprintf("stopped: %s (%s)", r.Violation.Syscall, r.Violation.Hint)
			case len(r.Violations) > 0:
				v := r.Violations[0]
				text = fmt.Sprintf("exit %d, refused: %s by %s (%s)", *r.ExitCode, v.Syscall, v.Program, v.Hint)
			case r.ExitCode != nil:
				text = fmt.Sprintf("exit %d: %q", *r.ExitCode, r.Stdout)
			default:
				text = fmt.Sprintf("signal %d", *r.Signal)
			}
			mu.Lock()
			lines[name] = text
			mu.Unlock()
		}(name, req)
	}
	wg.Wait()
	for _, name := range []string{"echo", "socket", "bad"} {
		fmt.Printf("%s: %s\n", name, lines[name])
	}
	if err := c.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "sandbox serve:", err)
		os.Exit(1)
	}
}
