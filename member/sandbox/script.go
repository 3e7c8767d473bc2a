package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/murmur-run/murmur/member/capsule"
	"github.com/murmur-run/murmur/runtimetools"
)

// Limits of a script capsule's run and of lifecycle.done_check.
const (
	// ScriptTimeout is a script's time limit when script.timeout_secs is not set, and done_check's.
	ScriptTimeout   = 5 * time.Minute
	maxScriptAnswer = 4 << 20 // bytes of stdout kept as the answer
	stderrTail      = 2 << 10 // bytes of stderr quoted in a failure
	checkOutput     = 8 << 10 // bytes of done_check's output kept
)

// RunScript runs a script capsule's command for one task: text on stdin, stdout the answer. A non-zero
// exit fails the task with the tail of stderr; the time limit kills it and everything it started. env
// holds NAME=value entries added to its environment.
func (r *Runner) RunScript(ctx context.Context, spec *capsule.ScriptSpec, stdin io.Reader, env ...string) (string, error) {
	limit := ScriptTimeout
	if spec.TimeoutSecs > 0 {
		limit = time.Duration(spec.TimeoutSecs) * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()

	var stdout Capped
	stdout.Max = maxScriptAnswer
	var stderr Tail
	stderr.Max = stderrTail
	code, err := r.RunCommand(ctx, spec.Command, stdin, &stdout, &stderr, env...)
	switch {
	case ctx.Err() == context.DeadlineExceeded:
		return "", fmt.Errorf("script %s did not finish within %s (script.timeout_secs) and was killed", spec.Command[0], limit)
	case ctx.Err() != nil:
		return "", ctx.Err()
	case err != nil:
		return "", fmt.Errorf("script %s could not run: %v", spec.Command[0], err)
	case code != 0:
		msg := fmt.Sprintf("script %s exited with status %d", spec.Command[0], code)
		if st := strings.TrimSpace(stderr.String()); st != "" {
			msg += ": " + st
		}
		return "", errors.New(msg)
	}
	out := strings.TrimSuffix(stdout.String(), "\n")
	if stdout.Cut {
		out += fmt.Sprintf("\n[answer cut at %d bytes]", maxScriptAnswer)
	}
	return out, nil
}

// RunCheck runs lifecycle.done_check's command in the workdir, confined as every command is, within
// ScriptTimeout, and returns the end of its output and its exit code.
func (r *Runner) RunCheck(ctx context.Context, command []string) (string, int, error) {
	ctx, cancel := context.WithTimeout(ctx, ScriptTimeout)
	defer cancel()
	var out Tail
	out.Max = checkOutput
	code, err := r.RunCommand(ctx, command, nil, &out, &out)
	if errors.Is(err, context.DeadlineExceeded) {
		err = fmt.Errorf("it did not finish within %s and was killed", ScriptTimeout)
	}
	return out.String(), code, err
}

// ShellTools resolves every name of capabilities.shell.allow once, at staging: one shell tool each,
// run through cm. capsulePath names the capsule in the errors.
func (cm *Commands) ShellTools(capsulePath string) ([]runtimetools.Tool, error) {
	var out []runtimetools.Tool
	var errs []error
	for _, name := range cm.cfg.Grants.Allow {
		path, err := ResolveShell(name)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", capsulePath, err))
			continue
		}
		out = append(out, &runtimetools.Shell{Name: name, Path: path, OutputLimit: cm.OutputLimit(), Runner: cm})
	}
	return out, errors.Join(errs...)
}

// Confines reports whether commands run under their Landlock rules: capabilities.shell.confine is not
// false, there is a helper to apply them (confineHelper), and this host has Landlock.
func Confines(confine *bool, confineHelper string) bool {
	return (confine == nil || *confine) && confineHelper != "" && LandlockAvailable()
}
