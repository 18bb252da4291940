// Package sandbox is a small client for `sandbox serve`: one long-lived server process, JSON
// lines in and out, results matched to requests by id. Standard library only.
package sandbox

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"sync"
)

// Request is one exec request (docs/exec.md); ID is filled in by Client.Run.
type Request struct {
	ID       string            `json:"id"`
	Argv     []string          `json:"argv"`
	Cwd      string            `json:"cwd,omitempty"`
	Env      map[string]string `json:"env,omitempty"`
	Stdin    string            `json:"stdin,omitempty"`
	TimeoutS float64           `json:"timeout_s,omitempty"`
	Profile  string            `json:"profile,omitempty"`
}

// Violation names a system call the profile refused and what would allow it.
type Violation struct {
	Syscall string `json:"syscall"`
	Number  *int   `json:"number"`
	Profile string `json:"profile"`
	Hint    string `json:"hint"`
	// Count and Program: in Result.Violations, how often that program made the call.
	Count   int    `json:"count,omitempty"`
	Program string `json:"program,omitempty"`
	// Change is the request change that would allow it.
	Change string `json:"change,omitempty"`
}

// Result is what happened to a request that ran.
type Result struct {
	ExitCode        *int    `json:"exit_code"`
	Signal          *int    `json:"signal"`
	Stdout          string  `json:"stdout"`
	Stderr          string  `json:"stderr"`
	StdoutTruncated bool    `json:"stdout_truncated"`
	StderrTruncated bool    `json:"stderr_truncated"`
	DurationS       float64 `json:"duration_s"`
	TimedOut        bool    `json:"timed_out"`
	Cancelled       bool    `json:"cancelled"`
	// Violation: the call that ended the program (on_violation "kill").
	Violation *Violation `json:"violation"`
	// Violations: every refused call that failed with an errno while the program went on.
	Violations []Violation `json:"violations"`
	Warnings   []string    `json:"warnings"`
}

// RequestError is the server's answer to a request it did not run: which field, and why.
type RequestError struct {
	Field  string `json:"field"`
	Reason string `json:"reason"`
}

func (e *RequestError) Error() string { return e.Field + ": " + e.Reason }

// line is one line the server writes: a result, or an error.
type line struct {
	ID    *string       `json:"id"`
	Error *RequestError `json:"error"`
	Result
}

type answer struct {
	result Result
	err    error
}

// Client talks to one `sandbox serve` child; safe for concurrent use.
type Client struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	mu      sync.Mutex
	next    int
	pending map[string]chan answer
	done    chan struct{}
	readErr error
}

// Start runs `sandboxPath serve` (extra arguments such as --max-concurrent go after it).
func Start(sandboxPath string, args ...string) (*Client, error) {
	cmd := exec.Command(sandboxPath, append([]string{"serve"}, args...)...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &Client{cmd: cmd, stdin: stdin, pending: map[string]chan answer{}, done: make(chan struct{})}
	go c.read(stdout)
	return c, nil
}

func (c *Client) read(r io.Reader) {
	defer close(c.done)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 64*1024*1024)
	for sc.Scan() {
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil || l.ID == nil {
			continue // an error about a line we never sent
		}
		c.mu.Lock()
		ch := c.pending[*l.ID]
		delete(c.pending, *l.ID)
		c.mu.Unlock()
		if ch == nil {
			continue
		}
		if l.Error != nil {
			ch <- answer{err: l.Error}
		} else {
			ch <- answer{result: l.Result}
		}
	}
	c.mu.Lock()
	c.readErr = errors.New("sandbox serve ended")
	for id, ch := range c.pending {
		ch <- answer{err: c.readErr}
		delete(c.pending, id)
	}
	c.mu.Unlock()
}

// Run sends one request and waits for its result. A request the server refused returns a
// *RequestError.
func (c *Client) Run(req Request) (Result, error) {
	ch := make(chan answer, 1)
	c.mu.Lock()
	if c.readErr != nil {
		c.mu.Unlock()
		return Result{}, c.readErr
	}
	c.next++
	req.ID = "go-" + strconv.Itoa(c.next)
	c.pending[req.ID] = ch
	data, err := json.Marshal(req)
	if err == nil {
		_, err = c.stdin.Write(append(data, '\n'))
	}
	if err != nil {
		delete(c.pending, req.ID)
		c.mu.Unlock()
		return Result{}, fmt.Errorf("sending the request: %w", err)
	}
	c.mu.Unlock()
	a := <-ch
	return a.result, a.err
}

// Close ends the server (EOF on its stdin: it finishes running requests, then exits).
func (c *Client) Close() error {
	c.stdin.Close()
	<-c.done
	return c.cmd.Wait()
}
