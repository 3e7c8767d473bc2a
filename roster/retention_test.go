package roster_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/murmur-run/murmur/roster"
)

func TestParseStoreRetention(t *testing.T) {
	for _, tt := range []struct {
		name, yaml string
		want       roster.Retention
	}{
		{"absent", "", roster.Retention{}},
		{"both", "store:\n  retention:\n    max_age: 72h\n    max_tasks: 500\n", roster.Retention{MaxAge: 72 * time.Hour, MaxTasks: 500}},
		{"age only", "store: {retention: {max_age: 90m}}\n", roster.Retention{MaxAge: 90 * time.Minute}},
		{"count only", "store: {retention: {max_tasks: 1}}\n", roster.Retention{MaxTasks: 1}},
		{"empty retention", "store: {retention: {}}\n", roster.Retention{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := formationDir(t, "lead", "worker")
			r, err := roster.Parse(filepath.Join(dir, "roster.yaml"), []byte(twoMembers+tt.yaml))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, r.Store.Retention); diff != "" {
				t.Errorf("retention (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseStoreRetentionErrors(t *testing.T) {
	for _, tt := range []struct {
		name, yaml string
		want       []string
	}{
		{
			name: "store is not a mapping",
			yaml: "store: 168h\n",
			want: []string{`$DIR/roster.yaml:7: store must be a mapping of keys, not "168h"; write store: {retention: {max_age: 168h, max_tasks: 10000}}`},
		},
		{
			name: "store without a value",
			yaml: "store:\n",
			want: []string{`$DIR/roster.yaml:7: store has no value; write store: {retention: {max_age: 168h, max_tasks: 10000}}, or remove the key`},
		},
		{
			name: "misspelt key in store",
			yaml: "store:\n  retension: {max_age: 1h}\n",
			want: []string{`$DIR/roster.yaml:8: unknown key "retension" in store; did you mean "retention"? known keys: retention`},
		},
		{
			name: "retention is a list",
			yaml: "store:\n  retention: [1h, 10]\n",
			want: []string{`$DIR/roster.yaml:8: store.retention must be a mapping of keys, not a list; write retention: {max_age: 168h, max_tasks: 10000}`},
		},
		{
			name: "unknown key in retention",
			yaml: "store:\n  retention:\n    max_count: 10\n",
			want: []string{`$DIR/roster.yaml:9: unknown key "max_count" in store.retention; known keys: max_age, max_tasks`},
		},
		{
			name: "max_age in days",
			yaml: "store:\n  retention:\n    max_age: 7d\n",
			want: []string{`$DIR/roster.yaml:9: store.retention.max_age "7d" is not a duration; write a number with a unit, such as max_age: 168h for a week or max_age: 24h (h is the largest unit)`},
		},
		{
			name: "max_age zero",
			yaml: "store:\n  retention:\n    max_age: 0s\n",
			want: []string{`$DIR/roster.yaml:9: store.retention.max_age "0s" is shorter than a second; write at least 1s, such as max_age: 168h, or remove the key for the default of a week`},
		},
		{
			name: "max_age empty",
			yaml: "store:\n  retention:\n    max_age:\n",
			want: []string{`$DIR/roster.yaml:9: store.retention.max_age has no value; write max_age: 168h (a week; a duration in h, m or s), or remove the key`},
		},
		{
			name: "max_tasks zero",
			yaml: "store:\n  retention:\n    max_tasks: 0\n",
			want: []string{`$DIR/roster.yaml:9: store.retention.max_tasks must be from 1 to 2147483647, not 0; write how many ended tasks to keep, such as max_tasks: 10000, or remove the key for the default of 10000`},
		},
		{
			name: "max_tasks not a number",
			yaml: "store:\n  retention:\n    max_tasks: lots\n",
			want: []string{`$DIR/roster.yaml:9: store.retention.max_tasks must be a whole number, not "lots"; write how many ended tasks to keep, such as max_tasks: 10000`},
		},
		{
			name: "max_tasks quoted",
			yaml: "store:\n  retention:\n    max_tasks: \"100\"\n",
			want: []string{`$DIR/roster.yaml:9: store.retention.max_tasks must be a whole number, not "100"; write how many ended tasks to keep, such as max_tasks: 10000`},
		},
		{
			name: "both wrong, in line order",
			yaml: "store:\n  retention:\n    max_tasks: -3\n    max_age: soon\n",
			want: []string{
				`$DIR/roster.yaml:9: store.retention.max_tasks must be from 1 to 2147483647, not -3; write how many ended tasks to keep, such as max_tasks: 10000, or remove the key for the default of 10000`,
				`$DIR/roster.yaml:10: store.retention.max_age "soon" is not a duration; write a number with a unit, such as max_age: 168h for a week or max_age: 24h (h is the largest unit)`,
			},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := formationDir(t, "lead", "worker")
			r, err := roster.Parse(filepath.Join(dir, "roster.yaml"), []byte(twoMembers+tt.yaml))
			if err == nil {
				t.Fatalf("Parse succeeded with %+v; want errors", r.Store)
			}
			if diff := cmp.Diff(tt.want, messages(t, err, dir)); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}
