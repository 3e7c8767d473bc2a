package member

import (
	"context"
	"strings"

	"github.com/murmur-run/murmur/a2a"
)

// runScript runs the script capsule's command for one task, confined as every command is: the task
// text on stdin, stdout the answer (sandbox.Runner.RunScript).
func (s *Session) runScript(ctx context.Context, t *a2a.Task, text string) (string, error) {
	return s.runner.RunScript(ctx, s.cfg.Capsule.Script, strings.NewReader(text), "MUR_TASK_ID="+string(t.ID))
}

// workdir is where the session's commands run: its workdir, or the capsule directory without one.
func (s *Session) workdir() string {
	if s.cfg.WorkDir != "" {
		return s.cfg.WorkDir
	}
	return s.cfg.Capsule.Dir
}
