package capsule

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/murmur-run/murmur/roster"
)

func TestCapsuleStoreRetention(t *testing.T) {
	for _, tt := range []struct {
		name, yaml string
		want       roster.Retention
	}{
		{"absent", "", roster.Retention{}},
		{"both", "store:\n  retention:\n    max_age: 24h\n    max_tasks: 200\n", roster.Retention{MaxAge: 24 * time.Hour, MaxTasks: 200}},
		{"age only", "store: {retention: {max_age: 30m}}\n", roster.Retention{MaxAge: 30 * time.Minute}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("/w/murmur.yaml", []byte("name: w\nscript: {command: [cat]}\n"+tt.yaml))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, c.Store.Retention); diff != "" {
				t.Errorf("retention (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCapsuleStoreRetentionErrors(t *testing.T) {
	const path = "/w/murmur.yaml"
	for _, tt := range []struct {
		name, yaml string
		want       []string
	}{
		{
			name: "retention at the top level",
			yaml: "retention: {max_age: 1h}\n",
			want: []string{`/w/murmur.yaml:3: unknown key "retention" at the top level; retention belongs under store:; move it there, as store.retention`},
		},
		{
			name: "store is not a mapping",
			yaml: "store: 1h\n",
			want: []string{`/w/murmur.yaml:3: store must be a mapping of keys, not "1h"; write its keys indented under store:, or as store: {key: value}`},
		},
		{
			name: "unknown key in retention",
			yaml: "store:\n  retention:\n    max_tasks: 10\n    max_size: 1\n",
			want: []string{`/w/murmur.yaml:6: unknown key "max_size" in store.retention; known keys: max_age, max_tasks`},
		},
		{
			name: "max_age is not a duration",
			yaml: "store:\n  retention:\n    max_age: 1 week\n",
			want: []string{`/w/murmur.yaml:5: store.retention.max_age "1 week" is not a duration; write a number with a unit, such as max_age: 168h for a week or max_age: 24h (h is the largest unit)`},
		},
		{
			name: "max_age below a second",
			yaml: "store:\n  retention:\n    max_age: 10ms\n",
			want: []string{`/w/murmur.yaml:5: store.retention.max_age "10ms" is shorter than a second; write at least 1s, such as max_age: 168h, or remove the key to keep the roster's (or the default of a week)`},
		},
		{
			name: "max_tasks zero",
			yaml: "store:\n  retention:\n    max_tasks: 0\n",
			want: []string{`/w/murmur.yaml:5: store.retention.max_tasks is 0, so no ended task could be kept; write at least 1, such as max_tasks: 10000, or remove the key to keep the roster's (or the default of 10000)`},
		},
		{
			name: "max_tasks negative",
			yaml: "store:\n  retention:\n    max_tasks: -1\n",
			want: []string{`/w/murmur.yaml:5: store.retention.max_tasks must be 0 or more, not -1; write a whole number of 0 or more, such as max_tasks: 10`},
		},
		{
			name: "max_tasks quoted",
			yaml: "store:\n  retention:\n    max_tasks: '500'\n",
			want: []string{`/w/murmur.yaml:5: store.retention.max_tasks must be a whole number, not the quoted text "500"; remove the quotes: max_tasks: 500`},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse(path, []byte("name: w\nscript: {command: [cat]}\n"+tt.yaml))
			if err == nil {
				t.Fatalf("Parse succeeded with %+v; want errors", c.Store)
			}
			var got []string
			for _, e := range unjoin(err) {
				var ce *Error
				if !errors.As(e, &ce) || ce.File != path || ce.Line < 1 {
					t.Errorf("error %q is not a *Error with file and line", e)
				}
				got = append(got, e.Error())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}
