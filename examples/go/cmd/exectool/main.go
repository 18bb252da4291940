// Command exectool is an agent's exec tool in the GoClaw style: it runs a shell command line
// with `sh -c`, a timeout and captured output, and confines it with libsandbox.so by setting
// LD_PRELOAD and the SECCOMP_* variables `sandbox env --json` prints (asked once, reused for
// every command). It prints a JSON result; a call the profile refuses is reported by name.
//
//	go run ./cmd/exectool -sandbox /path/to/sandbox -profile shell 'ls | wc -l'
//
// The preload cannot enter static programs; for those, and for limits and a process tree that
// is always cleaned up, use `sandbox serve` (cmd/serveclient) instead.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"syscall"
	"time"

	"example.com/sandbox-clients/sandbox"
)

// Result is what the tool returns to the model.
type Result struct {
	ExitCode int    `json:"exit_code"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	TimedOut bool   `json:"timed_out"`
	// Blocked names the system call the filter stopped, when it did.
	Blocked string `json:"blocked,omitempty"`
}

var blockedLine = regexp.MustCompile(`libsandbox: blocked syscall (\S+)`)

func run(vars map[string]string, command string, timeout time.Duration) Result {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", command)
	cmd.Env = sandbox.Environ(os.Environ(), vars)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := Result{Stdout: stdout.String(), Stderr: stderr.String(), TimedOut: ctx.Err() != nil}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		r.ExitCode = exit.ExitCode()
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			r.ExitCode = 128 + int(ws.Signal())
		}
	default:
		r.ExitCode = 127
		r.Stderr += err.Error()
	}
	// With --on-violation trap the filter's SIGSYS handler names the call on stderr; a shell
	// reports its child's SIGSYS as status 159.
	// Below `sh -c` the programs the shell starts inherit its filter but not the variables
	// (the preload removes them once installed), so their SIGSYS is not named: say so.
	if m := blockedLine.FindStringSubmatch(r.Stderr); m != nil {
		r.Blocked = m[1]
	} else if r.ExitCode == 128+int(syscall.SIGSYS) {
		r.Blocked = "a call the profile refuses (SIGSYS); sandbox serve names it"
	}
	return r
}

func main() {
	sandboxPath := flag.String("sandbox", "sandbox", "the sandbox binary")
	profile := flag.String("profile", "shell", "the profile (built-in name or file)")
	timeout := flag.Duration("timeout", 30*time.Second, "kill the command after this long")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: exectool [-sandbox PATH] [-profile P] [-timeout D] 'COMMAND LINE'")
		os.Exit(2)
	}
	vars, err := sandbox.Env(*sandboxPath, *profile, "--on-violation", "trap")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(125)
	}
	out, _ := json.Marshal(run(vars, flag.Arg(0), *timeout))
	fmt.Println(string(out))
}
