package staged

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/murmur-run/murmur/internal/ids"
	"github.com/murmur-run/murmur/member/artifact"
	"github.com/murmur-run/murmur/member/artifact/wasm"
	"github.com/murmur-run/murmur/member/artifact/wit"
	"github.com/murmur-run/murmur/member/artifact/wit/endpoint"
	"github.com/murmur-run/murmur/member/driver"
	"github.com/murmur-run/murmur/member/hooks"
	"github.com/murmur-run/murmur/member/records"
	"github.com/murmur-run/murmur/member/sandbox"
	"github.com/murmur-run/murmur/runtimetools"
)

// Run answers one call of a tool artifact for task on the WebAssembly runner, in the session's workdir;
// a level-2 tool may call manage_pull during it (Config.ToolHost), unless the call is a step of a plan
// (inPlan).
func (sa *Set) Run(ctx context.Context, task string, a *artifact.Artifact, call driver.ToolCall, inPlan bool) runtimetools.Result {
	name := a.Manifest.Name.Tool()
	d, err := sa.moduleDigest(a)
	if err != nil {
		return runtimetools.Refused(fmt.Sprintf("%s could not be run: %v", name, err))
	}
	input := call.Input
	if len(input) == 0 {
		input = json.RawMessage(`{}`)
	}
	mem := wasmMemoryMB
	if m := sa.cfg.Capsule.Capabilities.Shell.MemoryMB; m > 0 {
		mem = m
	}
	res, err := sa.runner.Run(ctx, wasm.Call{Name: name, Path: modulePath(a), Digest: d, Input: input, Workdir: sa.cfg.Workdir,
		Timeout: wasmTimeout, MemoryMB: mem, OutputLimit: sa.cfg.OutputLimit, Host: sa.toolHost(a, task, inPlan)})
	if err != nil {
		return runtimetools.Refused(fmt.Sprintf("%s could not be run: %v", name, err))
	}
	out := runtimetools.Result{Status: res.Status, Output: res.Output, Summary: fmt.Sprintf("%s@%s: %s", a.Manifest.Name, a.Manifest.Version, res.Status)}
	if res.Data != nil {
		var data any
		if json.Unmarshal(res.Data, &data) == nil {
			out.Data = data
		}
	}
	if res.Failure != "" {
		out.Status, out.Output = runtimetools.StatusError, res.Failure
	}
	if res.Stopped != wasm.StopNone {
		out.Note = fmt.Sprintf("[%s] The tool was stopped by %s.", name, res.Limit)
	}
	return out
}

// toolHost is what a's call for task may ask of the session: nothing below WIT level 2.
func (sa *Set) toolHost(a *artifact.Artifact, task string, inPlan bool) wasm.Host {
	if a.Manifest.WITLevel < wit.Level || sa.cfg.ToolHost == nil {
		return nil
	}
	return sa.cfg.ToolHost(task, inPlan)
}

// hookHost is what a hook's run may ask of the session: nothing below WIT level 2.
func (sa *Set) hookHost(a *artifact.Artifact, call hooks.Call) wit.Functions {
	if a.Manifest.WITLevel < wit.Level || sa.cfg.HookHost == nil {
		return wit.Functions{}
	}
	return sa.cfg.HookHost(call.Task, call.Hook)
}

// wasmHook runs a WebAssembly hook: the hook's input on stdin, its answer the data of the result it
// writes ({"status": "ok", "data": {"decision": "allow"}}), in an empty directory of its own. A level-2
// hook may call run_inference during the run (Config.HookHost).
func (sa *Set) wasmHook(a *artifact.Artifact) hooks.Runner {
	return hooks.RunnerFunc(func(ctx context.Context, call hooks.Call) ([]byte, error) {
		d, err := sa.moduleDigest(a)
		if err != nil {
			return nil, err
		}
		dir, err := os.MkdirTemp("", "mur-hook-")
		if err != nil {
			return nil, err
		}
		defer func() {
			if err := os.RemoveAll(dir); err != nil {
				sa.cfg.Log.Warn("a WebAssembly hook's directory is left behind", "hook", a.Manifest.Name, "dir", dir, "err", err)
			}
		}()
		res, err := sa.runner.Run(ctx, wasm.Call{Name: a.Manifest.Name.Tool(), Path: modulePath(a), Digest: d, Input: call.Input,
			Workdir: dir, MemoryMB: wasmMemoryMB, OutputLimit: call.Limit, Host: sa.hookHost(a, call)})
		switch {
		case err != nil:
			return nil, err
		case res.Failure != "":
			return nil, errors.New(res.Failure)
		case res.Status != wasm.StatusOK:
			return nil, fmt.Errorf("it answered status %s: %s", res.Status, res.Output)
		case res.Data == nil:
			return nil, errors.New(`its result has no data; a WebAssembly hook answers {"status": "ok", "data": {…}}`)
		}
		return res.Data, nil
	})
}

// commandHook runs a command hook under the confinement of shell binaries, from its artifact directory
// (which it may read), in the session's workdir. A level-2 hook's run gets an endpoint of its own on a
// Unix socket for run_inference, named with its one-run token in its environment (package endpoint).
func (sa *Set) commandHook(a *artifact.Artifact) hooks.Runner {
	return hooks.RunnerFunc(func(ctx context.Context, call hooks.Call) ([]byte, error) {
		limit := call.Limit
		command := slices.Clone(a.Manifest.Command)
		p, err := sa.hookProgram(a.Dir, command)
		if err != nil {
			return nil, err
		}
		if a.Manifest.WITLevel >= wit.Level {
			ep, err := endpoint.Open(ctx, sa.hookDir, sa.hookHost(a, call))
			if err != nil {
				return nil, fmt.Errorf("opening its run_inference endpoint: %w", err)
			}
			defer func() {
				// The hook has answered; a call on the endpoint still running, or its socket left, is said.
				if err := ep.Close(); err != nil {
					sa.cfg.Log.Warn("a hook's run_inference endpoint did not close cleanly", "hook", a.Manifest.Name, "err", err)
				}
			}()
			p.Env = append(p.Env, ep.Env()...)
		}
		out, errs := sandbox.Tail{Max: limit + 1}, sandbox.Tail{Max: 2 << 10}
		p.Stdin, p.Stdout, p.Stderr = bytes.NewReader(call.Input), &out, &errs
		code, err := sa.cfg.Runner.Run(ctx, p)
		if err != nil {
			return nil, err
		}
		if code != 0 {
			return nil, fmt.Errorf("it exited with status %d: %s", code, strings.TrimSpace(errs.String()))
		}
		if len(out.String()) > limit {
			return nil, fmt.Errorf("it wrote more than %d bytes", limit)
		}
		return []byte(out.String()), nil
	})
}

// hookProgram resolves a command hook's program: a path with a slash inside its artifact directory, a
// bare name on the trusted PATH; the artifact directory is readable to it.
func (sa *Set) hookProgram(dir string, command []string) (sandbox.Program, error) {
	name := command[0]
	path := name
	if strings.Contains(name, "/") {
		path = filepath.Join(dir, filepath.FromSlash(name))
	} else {
		p, err := sandbox.ResolveShell(name)
		if err != nil {
			return sandbox.Program{}, fmt.Errorf("%s is in none of %s", name, strings.Join(sandbox.TrustedPath, ", "))
		}
		path = p
	}
	return sandbox.Program{ID: ids.NewWorkID(), Path: path, Name: name, Args: command[1:], Read: []string{dir},
		Env: []string{"MUR_MEMBER=" + sa.cfg.Member, "MUR_SESSION=" + sa.cfg.Session}, MemMB: sa.cfg.Capsule.Capabilities.Shell.MemoryMB}, nil
}

// CheckToolCall asks the on-tool-call hooks about a call: allowed, denied (d.Refusal() is the tool
// error) or to be asked of the task's sender (d.Ask).
func (sa *Set) CheckToolCall(ctx context.Context, call hooks.ToolCall) hooks.Decision {
	if sa == nil || sa.hooks.Empty() {
		return hooks.Decision{Allow: true}
	}
	return sa.hooks.CheckToolCall(ctx, call)
}

// CheckTaskEnd asks the on-task-end hooks whether a task that answered should be reopened, within
// lifecycle.max_task_reopens (end.Reopens is how many it had); the message to continue with when one
// asks, and true: the caller counts the reopen. It writes hook_reopen_refused or task_reopened.
func (sa *Set) CheckTaskEnd(ctx context.Context, end hooks.TaskEnd) (string, bool) {
	if sa == nil || sa.hooks.Empty() {
		return "", false
	}
	limit := hookReopensDefault
	if mr := sa.cfg.Capsule.Lifecycle.MaxTaskReopens; mr != nil {
		limit = *mr
	}
	r, ok := sa.hooks.CheckTaskEnd(ctx, end)
	if !ok {
		return "", false
	}
	reopens := end.Reopens
	if reopens >= limit {
		// A record the trace cannot take is lost; the work it records goes on without it.
		_ = sa.cfg.Recorder.Write(records.TypeHookReopenRefused, end.Task, map[string]any{"hook": r.Hook, "reopens": reopens, "limit": limit})
		return "", false
	}
	// A record the trace cannot take is lost; the work it records goes on without it.
	_ = sa.cfg.Recorder.Write(records.TypeTaskReopened, end.Task, map[string]any{"reason": "hook", "hook": r.Hook, "message": r.Message, "used": reopens + 1, "left": limit - reopens - 1})
	return fmt.Sprintf("[runtime] The policy hook %s reopened the task:\n%s", r.Hook, driver.Fence("hook:"+r.Hook, r.Message, "")), true
}
