package sandbox

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// Env asks `sandboxPath env --json` for the variables that confine a program with
// libsandbox.so (LD_PRELOAD, SECCOMP_*, ...) under a profile; extra arguments (such as
// "--on-violation", "trap") are passed on. Ask once and reuse the map for every command.
func Env(sandboxPath, profile string, extra ...string) (map[string]string, error) {
	args := append([]string{"env", "--json", "--profile", profile}, extra...)
	cmd := exec.Command(sandboxPath, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("sandbox env: %w", err)
	}
	vars := map[string]string{}
	if err := json.Unmarshal(out, &vars); err != nil {
		return nil, fmt.Errorf("sandbox env: %w", err)
	}
	return vars, nil
}

// Environ is base (KEY=value entries, such as os.Environ()) without any variable the sandbox
// owns, plus vars: an inherited LD_PRELOAD or SECCOMP_* must not weaken or replace the filter.
func Environ(base []string, vars map[string]string) []string {
	var out []string
	for _, kv := range base {
		key := kv
		if i := strings.IndexByte(kv, '='); i >= 0 {
			key = kv[:i]
		}
		if _, ours := vars[key]; ours || key == "LD_PRELOAD" || strings.HasPrefix(key, "SECCOMP_") {
			continue
		}
		out = append(out, kv)
	}
	for k, v := range vars {
		out = append(out, k+"="+v)
	}
	return out
}
