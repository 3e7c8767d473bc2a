package capsule

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPushConfigBounds: push.max_configs_per_task and push.max_configs_per_caller are whole numbers of 1
// or more; absent, they are 0 (the notifier's defaults).
func TestPushConfigBounds(t *testing.T) {
	load := func(body string) (*Capsule, error) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "murmur.yaml"), []byte("name: a\nscript: {command: [cat]}\n"+body+"\n"), 0o644)
		return Load(dir)
	}
	c, err := load("push: {allow: ['127.0.0.1'], max_configs_per_task: 3, max_configs_per_caller: 40}")
	if err != nil {
		t.Fatal(err)
	}
	if c.Push.MaxConfigsPerTask != 3 || c.Push.MaxConfigsPerCaller != 40 {
		t.Errorf("parsed %+v", c.Push)
	}
	if c, err := load("push: {allow: ['127.0.0.1']}"); err != nil || c.Push.MaxConfigsPerTask != 0 || c.Push.MaxConfigsPerCaller != 0 {
		t.Errorf("without the bounds: %+v %v, want 0 (the defaults)", c.Push, err)
	}
	for _, tc := range []struct{ body, says string }{
		{"push: {max_configs_per_task: 0}", "push.max_configs_per_task is 0, so no webhook could ever be registered; write at least 1, or remove the key for the default of 10"},
		{"push: {max_configs_per_caller: 0}", "push.max_configs_per_caller is 0"},
		{"push: {max_configs_per_caller: -1}", "push.max_configs_per_caller must be 0 or more, not -1; write a whole number of 1 or more, such as max_configs_per_caller: 100"},
		{"push: {max_configs_per_task: many}", "push.max_configs_per_task must be a whole number"},
		{"push: {max_configs_per_tasks: 3}", `unknown key "max_configs_per_tasks" in push`},
	} {
		_, err := load(tc.body)
		if err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v, want %q", tc.body, err, tc.says)
		}
	}
}
