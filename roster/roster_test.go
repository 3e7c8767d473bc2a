package roster_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/murmur-run/murmur/roster"
)

// formationDir returns a directory holding a capsule directory with a murmur.yaml for each name, plus
// "bare" (a directory without murmur.yaml) and "afile" (a plain file).
func formationDir(t *testing.T, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, n := range names {
		if err := os.MkdirAll(filepath.Join(dir, n), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, n, "murmur.yaml"), []byte("name: "+n+"\nscript: {command: [cat]}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "bare"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "afile"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// messages returns the text of every *roster.Error joined in err, with dir written as $DIR.
func messages(t *testing.T, err error, dir string) []string {
	t.Helper()
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok {
		t.Fatalf("error is %T, not an errors.Join: %v", err, err)
	}
	var out []string
	for _, e := range joined.Unwrap() {
		var re *roster.Error
		if !errors.As(e, &re) {
			t.Fatalf("error %v is %T, not *roster.Error", e, e)
		}
		out = append(out, strings.ReplaceAll(re.Error(), dir, "$DIR"))
	}
	return out
}

const twoMembers = `formation: t
members:
  - name: lead
    capsule: ./lead
  - name: worker
    capsule: ./worker
`

// storeFix is the fix of a bad store: URL.
const storeFix = "write a PostgreSQL URL without its password, such as store: postgres://murmur@db:5432/murmur, and the password as store_password: env:NAME"

func TestParseErrors(t *testing.T) {
	const yamlFix = `fix the syntax there: indent with spaces, not tabs, and quote text that holds ": " or starts with * & ! | > % @ (write "*" as to: ["*"])`
	const example = "formation: NAME, then members: with one entry per member (- name: NAME with capsule: DIR under it)"
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{
			name: "YAML syntax error names the line of the mistake, not of its block",
			yaml: "formation: t\nmembers:\n  - name: lead\n    capsule: ./lead\n  oops: [\n",
			want: []string{"$DIR/roster.yaml:5: not valid YAML: did not find expected '-' indicator; " + yamlFix},
		},
		{
			name: "tab indentation",
			yaml: "formation: t\nmembers:\n\t- name: lead\n",
			want: []string{"$DIR/roster.yaml:3: not valid YAML: found character that cannot start any token; " + yamlFix},
		},
		{
			name: "a quote left open from the first line is named there, not past the file's end",
			yaml: "formation: 't\nmembers:\n  - {name: lead, capsule: ./lead}\n",
			want: []string{"$DIR/roster.yaml:1: not valid YAML: found unexpected end of stream; " + yamlFix},
		},
		{
			name: "unquoted star",
			yaml: twoMembers + "reach:\n  - {from: lead, to: [*]}\n",
			want: []string{"$DIR/roster.yaml:8: not valid YAML: did not find expected alphabetic or numeric character; " + yamlFix},
		},
		{
			name: "empty file",
			yaml: "# nothing yet\n",
			want: []string{"$DIR/roster.yaml: the file is empty; write " + example},
		},
		{
			name: "file is not a mapping",
			yaml: "- lead\n- worker\n",
			want: []string{"$DIR/roster.yaml:1: the file must be a mapping of keys, not a list; write " + example},
		},
		{
			name: "syntax error in a second document",
			yaml: twoMembers + "---\nx: [\n",
			want: []string{"$DIR/roster.yaml:8: not valid YAML: did not find expected node content; " + yamlFix},
		},
		{
			name: "second document",
			yaml: twoMembers + "---\nformation: u\n",
			want: []string{"$DIR/roster.yaml:7: a second YAML document starts here; keep one roster per file: remove this --- and what follows it"},
		},
		{
			name: "unknown top-level key, with the closest known key",
			yaml: "formation: t\nmembrs:\n  - {name: lead, capsule: ./lead}\n",
			want: []string{
				"$DIR/roster.yaml:1: members is missing; add members: with one entry per member, such as members: [{name: lead, capsule: ./lead}]",
				`$DIR/roster.yaml:2: unknown key "membrs" at the top level; did you mean "members"? known keys: formation, entry, members, reach, store`,
			},
		},
		{
			name: "unknown member key",
			yaml: "formation: t\nmembers:\n  - name: lead\n    capsule: ./lead\n    port: 7101\n",
			want: []string{`$DIR/roster.yaml:5: unknown key "port" in member lead; known keys: name, capsule, listen, url, store, store_password, replicas`},
		},
		{
			name: "unknown member key close to a known one",
			yaml: "formation: t\nmembers:\n  - name: lead\n    capsul: ./lead\n",
			want: []string{
				"$DIR/roster.yaml:3: member lead has no capsule; add the capsule directory, relative to the roster's directory, such as capsule: ./lead",
				`$DIR/roster.yaml:4: unknown key "capsul" in member lead; did you mean "capsule"? known keys: name, capsule, listen, url, store, store_password, replicas`,
			},
		},
		{
			name: "a store URL with its password",
			yaml: "formation: t\nmembers:\n  - name: lead\n    capsule: ./lead\n    store: postgres://murmur:hunter2@db:5432/murmur\n",
			want: []string{"$DIR/roster.yaml:5: store of member lead: the URL holds a password, which would then be readable by everyone who reads roster.yaml; " + storeFix},
		},
		{
			name: "a store that is not PostgreSQL",
			yaml: "formation: t\nmembers:\n  - name: lead\n    capsule: ./lead\n    store: sqlite:///tmp/x.db\n",
			want: []string{`$DIR/roster.yaml:5: store of member lead: "sqlite:///tmp/x.db" is not a postgres:// URL; the embedded SQLite store needs no store: key; ` + storeFix},
		},
		{
			name: "a store password written out, and without a store",
			yaml: "formation: t\nmembers:\n  - name: lead\n    capsule: ./lead\n    store_password: hunter2\n",
			want: []string{
				"$DIR/roster.yaml:5: store_password of member lead must say where the password is, not be it; write store_password: env:NAME (an environment variable) or store_password: file:PATH (a file holding it)",
				"$DIR/roster.yaml:5: store_password of member lead has no store: to be the password of; add store: postgres://USER@HOST:5432/DB, or remove store_password",
			},
		},
		{
			name: "replicas that are not a count",
			yaml: "formation: t\nmembers:\n  - name: lead\n    capsule: ./lead\n    replicas: 0\n  - name: worker\n    capsule: ./lead\n    replicas: two\n",
			want: []string{
				`$DIR/roster.yaml:5: replicas of member lead is "0", not a whole number from 1 to 64; write how many processes run the member, such as replicas: 3 (they share its tasks through its store: postgres://…)`,
				`$DIR/roster.yaml:8: replicas of member worker is "two", not a whole number from 1 to 64; write how many processes run the member, such as replicas: 3 (they share its tasks through its store: postgres://…)`,
			},
		},
		{
			name: "replicas beyond the bound, not whole, or not one value",
			yaml: "formation: t\nmembers:\n  - {name: lead, capsule: ./lead, replicas: 65}\n  - {name: worker, capsule: ./lead, replicas: 2.5}\n  - {name: critic, capsule: ./lead, replicas: -1}\n  - {name: judge, capsule: ./lead, replicas: [3]}\n  - {name: scribe, capsule: ./lead, replicas: }\n",
			want: []string{
				`$DIR/roster.yaml:3: replicas of member lead is "65", not a whole number from 1 to 64; write how many processes run the member, such as replicas: 3 (they share its tasks through its store: postgres://…)`,
				`$DIR/roster.yaml:4: replicas of member worker is "2.5", not a whole number from 1 to 64; write how many processes run the member, such as replicas: 3 (they share its tasks through its store: postgres://…)`,
				`$DIR/roster.yaml:5: replicas of member critic is "-1", not a whole number from 1 to 64; write how many processes run the member, such as replicas: 3 (they share its tasks through its store: postgres://…)`,
				"$DIR/roster.yaml:6: replicas of member judge must be a single value, not a list; write replicas: 3, or remove the key",
				"$DIR/roster.yaml:7: replicas of member scribe has no value; write replicas: 3, or remove the key",
			},
		},
		{
			name: "unknown reach rule key",
			yaml: twoMembers + "reach:\n  - from: lead\n    to: [worker]\n    via: door\n",
			want: []string{`$DIR/roster.yaml:10: unknown key "via" in the reach rule from lead; known keys: from, to`},
		},
		{
			name: "repeated key",
			yaml: "formation: t\n" + twoMembers,
			want: []string{`$DIR/roster.yaml:2: key "formation" appears twice at the top level (first at line 1); keep one of them`},
		},
		{
			name: "missing formation",
			yaml: "members:\n  - {name: lead, capsule: ./lead}\n",
			want: []string{"$DIR/roster.yaml:1: formation is missing; add the formation's name at the top level, such as formation: hello"},
		},
		{
			name: "formation of the wrong type",
			yaml: "formation: [a, b]\nmembers:\n  - {name: lead, capsule: ./lead}\n",
			want: []string{"$DIR/roster.yaml:1: formation must be a single value, not a list; write the formation's name, such as formation: hello"},
		},
		{
			name: "formation without a value",
			yaml: "formation:\nmembers:\n  - {name: lead, capsule: ./lead}\n",
			want: []string{"$DIR/roster.yaml:1: formation has no value; write the formation's name, such as formation: hello"},
		},
		{
			name: "missing members",
			yaml: "formation: t\n",
			want: []string{"$DIR/roster.yaml:1: members is missing; add members: with one entry per member, such as members: [{name: lead, capsule: ./lead}]"},
		},
		{
			name: "empty members",
			yaml: "formation: t\nmembers: []\n",
			want: []string{"$DIR/roster.yaml:2: members lists no member; add at least one, such as members: [{name: lead, capsule: ./lead}]"},
		},
		{
			name: "members without a value",
			yaml: "formation: t\nmembers:\n",
			want: []string{"$DIR/roster.yaml:2: members lists no member; add at least one, such as members: [{name: lead, capsule: ./lead}]"},
		},
		{
			name: "members of the wrong type",
			yaml: "formation: t\nmembers: foo\n",
			want: []string{`$DIR/roster.yaml:2: members must be a list, not "foo"; write one entry per member under members:, each "- name: NAME" with "capsule: DIR" indented under it`},
		},
		{
			name: "a member that is not a mapping",
			yaml: "formation: t\nmembers:\n  - lead\n",
			want: []string{`$DIR/roster.yaml:3: member 1 must be a mapping with name: and capsule:, not "lead"; write "- name: NAME" with "capsule: DIR" indented under it, or - {name: NAME, capsule: DIR}`},
		},
		{
			name: "a member that is an alias",
			yaml: "formation: t\nmembers:\n  - &lead {name: lead, capsule: ./lead}\n  - *lead\n",
			want: []string{"$DIR/roster.yaml:4: member 2 is the alias *lead of another entry; write each member out in full: every member needs a name and a door of its own"},
		},
		{
			name: "anchors and aliases elsewhere are followed",
			yaml: twoMembers + "reach:\n  - {from: lead, to: &callees [worker, lead]}\n",
			want: []string{"$DIR/roster.yaml:8: member lead reaches itself; remove lead from this to: list (a member never calls itself)"},
		},
		{
			name: "a key that is not plain text",
			yaml: twoMembers + "? [a, b]\n: c\n",
			want: []string{"$DIR/roster.yaml:7: a key at the top level is a list; write plain names as keys; known keys: formation, entry, members, reach, store"},
		},
		{
			name: "member without name",
			yaml: "formation: t\nmembers:\n  - capsule: ./lead\n",
			want: []string{"$DIR/roster.yaml:3: this member has no name; add one, such as name: worker (lowercase letters, digits and -, starting with a letter)"},
		},
		{
			name: "member name of the wrong type",
			yaml: "formation: t\nmembers:\n  - name: {first: lead}\n    capsule: ./lead\n",
			want: []string{"$DIR/roster.yaml:3: the member's name must be a single value, not a mapping; write name: worker"},
		},
		{
			name: "bad name",
			yaml: "formation: t\nmembers:\n  - name: Lead_1\n    capsule: ./lead\n",
			want: []string{`$DIR/roster.yaml:3: member name "Lead_1" is not a valid name; use lowercase letters, digits and -, starting with a letter, such as name: lead-1`},
		},
		{
			name: "name starting with a digit",
			yaml: "formation: t\nmembers:\n  - name: 1st\n    capsule: ./lead\n",
			want: []string{`$DIR/roster.yaml:3: member name "1st" is not a valid name; use lowercase letters, digits and -, starting with a letter, such as name: st`},
		},
		{
			name: "duplicate name",
			yaml: twoMembers + "  - name: lead\n    capsule: ./worker\n",
			want: []string{`$DIR/roster.yaml:7: member name "lead" is used twice (first at line 3); give each member a name of its own`},
		},
		{
			name: "missing capsule",
			yaml: "formation: t\nmembers:\n  - name: lead\n",
			want: []string{"$DIR/roster.yaml:3: member lead has no capsule; add the capsule directory, relative to the roster's directory, such as capsule: ./lead"},
		},
		{
			name: "empty capsule",
			yaml: "formation: t\nmembers:\n  - name: lead\n    capsule: ''\n",
			want: []string{"$DIR/roster.yaml:4: capsule of member lead is empty; write the capsule directory, such as capsule: ./lead"},
		},
		{
			name: "capsule that does not exist",
			yaml: "formation: t\nmembers:\n  - name: lead\n    capsule: ./leed\n",
			want: []string{`$DIR/roster.yaml:4: capsule "./leed" of member lead does not exist (looked for $DIR/leed); create that directory with a murmur.yaml in it, or fix the path: it is relative to $DIR`},
		},
		{
			name: "capsule without murmur.yaml",
			yaml: "formation: t\nmembers:\n  - name: lead\n    capsule: bare\n",
			want: []string{`$DIR/roster.yaml:4: capsule "bare" of member lead has no murmur.yaml (looked for $DIR/bare/murmur.yaml); write the capsule's murmur.yaml there, or point capsule: at the directory that holds it`},
		},
		{
			name: "capsule that is a file",
			yaml: "formation: t\nmembers:\n  - name: lead\n    capsule: ./afile\n",
			want: []string{`$DIR/roster.yaml:4: capsule "./afile" of member lead is a file, not a directory ($DIR/afile); name the directory that holds the capsule's murmur.yaml`},
		},
		{
			name: "listen that is not host:port",
			yaml: "formation: t\nmembers:\n  - name: lead\n    capsule: ./lead\n    listen: 7101\n",
			want: []string{`$DIR/roster.yaml:5: listen "7101" of member lead is not host:port; write the door's address with its port, such as listen: 127.0.0.1:7101 (or [::1]:7101), or remove the key for a default`},
		},
		{
			name: "listen port out of range",
			yaml: "formation: t\nmembers:\n  - name: lead\n    capsule: ./lead\n    listen: 127.0.0.1:99999\n",
			want: []string{`$DIR/roster.yaml:5: listen "127.0.0.1:99999" of member lead has a bad port "99999"; write a port from 1 to 65535, such as listen: 127.0.0.1:7101 (or 0 for one the system picks)`},
		},
		{
			name: "listen port out of range",
			yaml: "formation: t\nmembers:\n  - name: lead\n    capsule: ./lead\n    listen: 'localhost:70000'\n",
			want: []string{`$DIR/roster.yaml:5: listen "localhost:70000" of member lead has a bad port "70000"; write a port from 1 to 65535, such as listen: 127.0.0.1:7101 (or 0 for one the system picks)`},
		},
		{
			name: "listen port by name",
			yaml: "formation: t\nmembers:\n  - name: lead\n    capsule: ./lead\n    listen: 127.0.0.1:http\n",
			want: []string{`$DIR/roster.yaml:5: listen "127.0.0.1:http" of member lead has a bad port "http"; write a port from 1 to 65535, such as listen: 127.0.0.1:7101 (or 0 for one the system picks)`},
		},
		{
			name: "listen host",
			yaml: "formation: t\nmembers:\n  - name: lead\n    capsule: ./lead\n    listen: 'my host:7101'\n",
			want: []string{`$DIR/roster.yaml:5: listen "my host:7101" of member lead has a bad host "my host"; write an IP address or a host name, such as listen: 127.0.0.1:7101`},
		},
		{
			name: "two members on the same listen address",
			yaml: "formation: t\nmembers:\n  - {name: lead, capsule: ./lead, listen: '127.0.0.1:7101'}\n  - {name: worker, capsule: ./worker, listen: '127.0.0.1:7101'}\n",
			want: []string{"$DIR/roster.yaml:4: listen 127.0.0.1:7101 of member worker is already used by member lead (line 3); give each member its own port, or remove listen: to get a free one"},
		},
		{
			name: "a wildcard listen address takes its port on every interface",
			yaml: "formation: t\nmembers:\n  - {name: lead, capsule: ./lead, listen: '0.0.0.0:7200'}\n  - {name: worker, capsule: ./worker, listen: 'localhost:7200'}\n",
			want: []string{"$DIR/roster.yaml:4: listen localhost:7200 of member worker is already used by member lead (line 3); give each member its own port, or remove listen: to get a free one"},
		},
		{
			name: "url that is not an http URL",
			yaml: "formation: t\nmembers:\n  - name: lead\n    capsule: ./lead\n    url: 127.0.0.1:7101\n",
			want: []string{`$DIR/roster.yaml:5: url "127.0.0.1:7101" of member lead is not an http:// or https:// URL with a host; write how peers reach the door, such as url: http://127.0.0.1:7101, or remove the key to derive it from listen`},
		},
		{
			name: "url with a query",
			yaml: "formation: t\nmembers:\n  - name: lead\n    capsule: ./lead\n    url: http://lead:7101/?x=1\n",
			want: []string{`$DIR/roster.yaml:5: url "http://lead:7101/?x=1" of member lead has a user, query or fragment; write only scheme, host, port and path, such as url: http://127.0.0.1:7101`},
		},
		{
			name: "url that is another member's door",
			yaml: "formation: t\nmembers:\n  - {name: lead, capsule: ./lead}\n  - name: worker\n    capsule: ./worker\n    url: http://127.0.0.1:7101/\n",
			want: []string{"$DIR/roster.yaml:6: member worker is reached at http://127.0.0.1:7101, as member lead is (line 3); give each member a door of its own: a different url:, or a different listen: port"},
		},
		{
			name: "entry naming an unknown member, close to a known one",
			yaml: "formation: t\nentry: leed\n" + strings.TrimPrefix(twoMembers, "formation: t\n"),
			want: []string{`$DIR/roster.yaml:2: entry "leed" is no member; did you mean "lead"?`},
		},
		{
			name: "entry naming an unknown member, close to none",
			yaml: "formation: t\nentry: operator\n" + strings.TrimPrefix(twoMembers, "formation: t\n"),
			want: []string{`$DIR/roster.yaml:2: entry "operator" is no member; the members are lead, worker`},
		},
		{
			name: "reach of the wrong type",
			yaml: twoMembers + "reach: everyone\n",
			want: []string{`$DIR/roster.yaml:7: reach must be a list of rules, not "everyone"; write one rule per caller under reach:, each "- from: MEMBER" with "to: [MEMBER, ...]" under it`},
		},
		{
			name: "reach rule that is not a mapping",
			yaml: twoMembers + "reach:\n  - lead\n",
			want: []string{`$DIR/roster.yaml:8: reach rule 1 must be a mapping with from: and to:, not "lead"; write - {from: MEMBER, to: [MEMBER, ...]}`},
		},
		{
			name: "reach rule from an unknown member",
			yaml: twoMembers + "reach:\n  - from: laed\n    to: [worker]\n",
			want: []string{`$DIR/roster.yaml:8: from "laed" of this reach rule is no member; did you mean "lead"?`},
		},
		{
			name: "reach rule from an unknown member, close to none",
			yaml: twoMembers + "reach:\n  - from: operator\n    to: [worker]\n",
			want: []string{`$DIR/roster.yaml:8: from "operator" of this reach rule is no member; the members are lead, worker`},
		},
		{
			name: "reach rule from everyone",
			yaml: twoMembers + "reach:\n  - from: '*'\n    to: [worker]\n",
			want: []string{`$DIR/roster.yaml:8: from: "*" is not a member; write one rule per calling member, such as from: lead`},
		},
		{
			name: "reach rule to an unknown member",
			yaml: twoMembers + "reach:\n  - from: lead\n    to: [wrker]\n",
			want: []string{`$DIR/roster.yaml:9: to "wrker" of the reach rule from lead is no member; did you mean "worker"?`},
		},
		{
			name: "reach rule to an unknown member, close to none",
			yaml: twoMembers + "reach:\n  - from: lead\n    to:\n      - worker\n      - summarizer\n",
			want: []string{`$DIR/roster.yaml:11: to "summarizer" of the reach rule from lead is no member; the members are lead, worker`},
		},
		{
			name: "member reaching itself",
			yaml: twoMembers + "reach:\n  - from: lead\n    to: [worker, lead]\n",
			want: []string{"$DIR/roster.yaml:9: member lead reaches itself; remove lead from this to: list (a member never calls itself)"},
		},
		{
			name: "to empty",
			yaml: twoMembers + "reach:\n  - from: lead\n    to: []\n",
			want: []string{"$DIR/roster.yaml:9: to of the reach rule from lead is empty; name the members lead may call, such as to: [worker], or remove the rule"},
		},
		{
			name: "to without a value",
			yaml: twoMembers + "reach:\n  - from: lead\n    to:\n",
			want: []string{"$DIR/roster.yaml:9: to of the reach rule from lead is empty; name the members lead may call, such as to: [worker], or remove the rule"},
		},
		{
			name: "to holding an empty name",
			yaml: twoMembers + "reach:\n  - from: lead\n    to: [worker, '']\n",
			want: []string{`$DIR/roster.yaml:9: an entry of to in the reach rule from lead is "", not a member name; name the members lead may call, such as to: [worker], or to: ["*"] for every other member`},
		},
		{
			name: "to missing",
			yaml: twoMembers + "reach:\n  - from: lead\n",
			want: []string{`$DIR/roster.yaml:8: the reach rule from lead has no to; name the members lead may call, such as to: [worker], or to: ["*"] for every other member`},
		},
		{
			name: "to of the wrong type",
			yaml: twoMembers + "reach:\n  - from: lead\n    to: worker\n",
			want: []string{`$DIR/roster.yaml:9: to of the reach rule from lead must be a list, not "worker"; write to: [worker]`},
		},
		{
			name: "to holding a mapping",
			yaml: twoMembers + "reach:\n  - from: lead\n    to: [{name: worker}]\n",
			want: []string{`$DIR/roster.yaml:9: an entry of to in the reach rule from lead is a mapping, not a member name; name the members lead may call, such as to: [worker], or to: ["*"] for every other member`},
		},
		{
			name: "from missing",
			yaml: twoMembers + "reach:\n  - to: [worker]\n",
			want: []string{"$DIR/roster.yaml:8: this reach rule has no from; add the calling member, such as from: lead"},
		},
		{
			name: "every problem, in line order",
			yaml: "formaton: t\nmembers:\n  - name: lead\n    capsule: ./nowhere\n  - name: lead\n    capsule: ./worker\n    listen: nope\nreach:\n  - {from: lead, to: [lead, nobody]}\n",
			want: []string{
				`$DIR/roster.yaml:1: unknown key "formaton" at the top level; did you mean "formation"? known keys: formation, entry, members, reach, store`,
				"$DIR/roster.yaml:1: formation is missing; add the formation's name at the top level, such as formation: hello",
				`$DIR/roster.yaml:4: capsule "./nowhere" of member lead does not exist (looked for $DIR/nowhere); create that directory with a murmur.yaml in it, or fix the path: it is relative to $DIR`,
				`$DIR/roster.yaml:5: member name "lead" is used twice (first at line 3); give each member a name of its own`,
				`$DIR/roster.yaml:7: listen "nope" of member lead is not host:port; write the door's address with its port, such as listen: 127.0.0.1:7101 (or [::1]:7101), or remove the key for a default`,
				"$DIR/roster.yaml:9: member lead reaches itself; remove lead from this to: list (a member never calls itself)",
				`$DIR/roster.yaml:9: to "nobody" of the reach rule from lead is no member; the members are lead`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := formationDir(t, "lead", "worker")
			r, err := roster.Parse(filepath.Join(dir, "roster.yaml"), []byte(tt.yaml))
			if err == nil {
				t.Fatalf("Parse succeeded with %+v; want errors", r)
			}
			if r != nil {
				t.Errorf("Parse returned a roster with its error")
			}
			if diff := cmp.Diff(tt.want, messages(t, err, dir)); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestErrorIsReachableWithErrorsAs(t *testing.T) {
	dir := formationDir(t, "lead")
	_, err := roster.Parse(filepath.Join(dir, "roster.yaml"), []byte("formation: t\nmembers:\n  - name: lead\n"))
	var re *roster.Error
	if !errors.As(err, &re) {
		t.Fatalf("errors.As found no *roster.Error in %v", err)
	}
	want := &roster.Error{
		File: filepath.Join(dir, "roster.yaml"),
		Line: 3,
		Msg:  "member lead has no capsule",
		Fix:  "add the capsule directory, relative to the roster's directory, such as capsule: ./lead",
	}
	if diff := cmp.Diff(want, re); diff != "" {
		t.Errorf("error (-want +got):\n%s", diff)
	}
}

func TestErrorFormat(t *testing.T) {
	tests := []struct {
		err  roster.Error
		want string
	}{
		{roster.Error{File: "r.yaml", Line: 4, Msg: "bad", Fix: "write good"}, "r.yaml:4: bad; write good"},
		{roster.Error{File: "r.yaml", Msg: "bad", Fix: "write good"}, "r.yaml: bad; write good"},
		{roster.Error{File: "r.yaml", Line: 2, Msg: "bad"}, "r.yaml:2: bad"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}

func TestErrorNamesTheFileAsGiven(t *testing.T) {
	dir := formationDir(t, "lead")
	t.Chdir(dir)
	_, err := roster.Parse("roster.yaml", []byte("formation: t\n"))
	want := "roster.yaml:1: members is missing; add members: with one entry per member, such as members: [{name: lead, capsule: ./lead}]"
	if err == nil || err.Error() != want {
		t.Errorf("error = %v, want %s", err, want)
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := roster.Load(filepath.Join(t.TempDir(), "roster.yaml"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load of a missing file = %v, want an error wrapping fs.ErrNotExist", err)
	}
}

func TestLoadFillsDefaults(t *testing.T) {
	dir := formationDir(t, "lead", "worker", "critic", "judge", "scribe", "lookout")
	if err := os.MkdirAll(filepath.Join(dir, "shared"), 0o755); err != nil {
		t.Fatal(err)
	}
	abs := formationDir(t, "elsewhere")
	body := `# a formation
formation: hello
entry: lead
members:
  - name: lead            # default port: 7101 is free
    capsule: ./lead
  - name: worker          # 7102 is taken below, so 7103
    capsule: worker/
  - name: critic
    capsule: ./critic
    listen: 127.0.0.1:7102
  - name: judge
    capsule: ./judge
    listen: 0.0.0.0:7104
  - name: scribe
    capsule: ./scribe
    listen: '[::]:7300'
  - name: lookout
    capsule: ./shared/../lookout
    listen: 127.0.0.1:7400
    url: https://lookout.example:8443/door/
  - {name: remote, capsule: ` + filepath.Join(abs, "elsewhere") + `}
  - {name: anywhere, capsule: ./lead, listen: ':7500'}
reach:
  - from: lead
    to: ["*"]
`
	path := filepath.Join(dir, "roster.yaml")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := roster.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	want := &roster.Roster{
		Path:      path,
		Dir:       dir,
		Formation: "hello",
		Entry:     "lead",
		Members: []roster.Member{
			{Name: "lead", Capsule: filepath.Join(dir, "lead"), Listen: "127.0.0.1:7101", URL: "http://127.0.0.1:7101", Line: 5},
			{Name: "worker", Capsule: filepath.Join(dir, "worker"), Listen: "127.0.0.1:7103", URL: "http://127.0.0.1:7103", Line: 7},
			{Name: "critic", Capsule: filepath.Join(dir, "critic"), Listen: "127.0.0.1:7102", URL: "http://127.0.0.1:7102", Line: 9},
			{Name: "judge", Capsule: filepath.Join(dir, "judge"), Listen: "0.0.0.0:7104", URL: "http://127.0.0.1:7104", Line: 12},
			{Name: "scribe", Capsule: filepath.Join(dir, "scribe"), Listen: "[::]:7300", URL: "http://127.0.0.1:7300", Line: 15},
			{Name: "lookout", Capsule: filepath.Join(dir, "lookout"), Listen: "127.0.0.1:7400", URL: "https://lookout.example:8443/door", Line: 18},
			{Name: "remote", Capsule: filepath.Join(abs, "elsewhere"), Listen: "127.0.0.1:7105", URL: "http://127.0.0.1:7105", Line: 22},
			{Name: "anywhere", Capsule: filepath.Join(dir, "lead"), Listen: ":7500", URL: "http://127.0.0.1:7500", Line: 23},
		},
		Reach: []roster.Rule{{From: "lead", To: []string{"*"}, Line: 25}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Load (-want +got):\n%s", diff)
	}
}

func TestParseRelativePath(t *testing.T) {
	dir := formationDir(t, "lead")
	t.Chdir(filepath.Dir(dir))
	r, err := roster.Parse(filepath.Join(filepath.Base(dir), "roster.yaml"), []byte("formation: t\nmembers: [{name: lead, capsule: lead}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(dir, "roster.yaml"), dir, filepath.Join(dir, "lead")}
	if diff := cmp.Diff(want, []string{r.Path, r.Dir, r.Members[0].Capsule}); diff != "" {
		t.Errorf("paths (-want +got):\n%s", diff)
	}
}

// reachRoster has rules out of roster order, a "*", a name repeated, and a member no rule names.
const reachRoster = `formation: t
members:
  - {name: lead, capsule: ./lead}
  - {name: planner, capsule: ./planner}
  - {name: worker, capsule: ./worker}
  - {name: critic, capsule: ./critic}
  - {name: loner, capsule: ./loner}
reach:
  - {from: lead, to: [critic, worker]}
  - {from: lead, to: [planner, worker]}
  - {from: planner, to: ["*"]}
  - {from: worker, to: [critic, "*"]}
  - {from: critic, to: [lead]}
`

func loadReach(t *testing.T) *roster.Roster {
	t.Helper()
	dir := formationDir(t, "lead", "planner", "worker", "critic", "loner")
	r, err := roster.Parse(filepath.Join(dir, "roster.yaml"), []byte(reachRoster))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestReachable(t *testing.T) {
	r := loadReach(t)
	tests := []struct {
		from string
		want []string
	}{
		{"lead", []string{"planner", "worker", "critic"}},
		{"planner", []string{"lead", "worker", "critic", "loner"}},
		{"worker", []string{"lead", "planner", "critic", "loner"}},
		{"critic", []string{"lead"}},
		{"loner", nil},
		{"stranger", nil},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, r.Reachable(tt.from)); diff != "" {
			t.Errorf("Reachable(%q) (-want +got):\n%s", tt.from, diff)
		}
	}
}

func TestMayCall(t *testing.T) {
	r := loadReach(t)
	tests := []struct {
		from, to string
		want     bool
	}{
		{"lead", "worker", true},
		{"lead", "critic", true},
		{"lead", "loner", false},
		{"lead", "lead", false},
		{"planner", "loner", true},
		{"planner", "planner", false},
		{"critic", "lead", true},
		{"critic", "worker", false},
		{"loner", "lead", false},
		{"stranger", "lead", false},
		{"lead", "stranger", false},
		{"planner", "*", false},
	}
	for _, tt := range tests {
		if got := r.MayCall(tt.from, tt.to); got != tt.want {
			t.Errorf("MayCall(%q, %q) = %v, want %v", tt.from, tt.to, got, tt.want)
		}
	}
}

func TestNamesAndMember(t *testing.T) {
	r := loadReach(t)
	if diff := cmp.Diff([]string{"lead", "planner", "worker", "critic", "loner"}, r.Names()); diff != "" {
		t.Errorf("Names (-want +got):\n%s", diff)
	}
	m, ok := r.Member("worker")
	if !ok || m.Name != "worker" || m.Listen != "127.0.0.1:7103" || m.Line != 5 {
		t.Errorf("Member(worker) = %+v, %v", m, ok)
	}
	if m, ok := r.Member("stranger"); ok {
		t.Errorf("Member(stranger) = %+v, true; want false", m)
	}
	names := r.Names()
	names[0] = "changed"
	if r.Members[0].Name != "lead" {
		t.Errorf("changing the slice Names returned changed the roster")
	}
}

func TestEmptyReachLetsNobodyCall(t *testing.T) {
	dir := formationDir(t, "lead", "worker")
	r, err := roster.Parse(filepath.Join(dir, "roster.yaml"), []byte(twoMembers+"reach:\n  # - {from: lead, to: [worker]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Reachable("lead"); got != nil {
		t.Errorf("Reachable(lead) = %q, want nil", got)
	}
	if r.Entry != "" {
		t.Errorf("Entry = %q, want empty", r.Entry)
	}
}

func TestPortZeroLetsTheSystemPick(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"a", "b"} {
		os.MkdirAll(filepath.Join(dir, n), 0o755)
		os.WriteFile(filepath.Join(dir, n, "murmur.yaml"), []byte("name: "+n+"\n"), 0o644)
	}
	r, err := roster.Parse(filepath.Join(dir, "roster.yaml"), []byte("formation: t\nmembers:\n  - {name: a, capsule: ./a, listen: 127.0.0.1:0}\n  - {name: b, capsule: ./b, listen: 127.0.0.1:0}\n"))
	if err != nil {
		t.Fatalf("two members on port 0: %v", err)
	}
	for _, m := range r.Members {
		if m.Listen != "127.0.0.1:0" || m.URL != "" {
			t.Errorf("member %s: listen %q url %q, want 127.0.0.1:0 and no url until the door listens", m.Name, m.Listen, m.URL)
		}
	}
}

func TestWithURLs(t *testing.T) {
	dir := formationDir(t, "lead", "worker")
	r, err := roster.Parse(filepath.Join(dir, "roster.yaml"), []byte(twoMembers))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		urls map[string]string
		want []string // the members' URLs in roster order, or the error
	}{
		{map[string]string{"lead": "http://lead:7101/", "worker": "http://worker:7102"}, []string{"http://lead:7101", "http://worker:7102"}},
		{map[string]string{"worker": "https://worker.example"}, []string{"http://127.0.0.1:7101", "https://worker.example"}},
		{nil, []string{"http://127.0.0.1:7101", "http://127.0.0.1:7102"}},
		{map[string]string{"boss": "http://boss:1"}, []string{"boss is no member of $DIR/roster.yaml; the members are lead, worker"}},
		{map[string]string{"lead": "lead:7101"}, []string{`url "lead:7101" of member lead is not an http:// or https:// URL with a host`}},
		{map[string]string{"lead": "http://lead:7101?x=1"}, []string{`url "http://lead:7101?x=1" of member lead has a user, query or fragment`}},
		{map[string]string{"worker": "http://127.0.0.1:7101"}, []string{"members lead and worker would both be reached at http://127.0.0.1:7101; give each member a door of its own"}},
	}
	for _, tt := range tests {
		var got []string
		if r2, err := r.WithURLs(tt.urls); err != nil {
			got = []string{strings.ReplaceAll(err.Error(), dir, "$DIR")}
		} else {
			for _, m := range r2.Members {
				got = append(got, m.URL)
			}
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("WithURLs(%v) (-want +got):\n%s", tt.urls, diff)
		}
	}
	// The roster itself is left as it was.
	if r.Members[0].URL != "http://127.0.0.1:7101" {
		t.Errorf("WithURLs changed its roster: %v", r.Members)
	}
}

// A member's store: is kept as written, with where its password comes from; a member without one keeps
// the embedded store.
func TestMemberStore(t *testing.T) {
	dir := formationDir(t, "lead", "worker")
	path := filepath.Join(dir, "roster.yaml")
	body := "formation: f\nmembers:\n  - name: lead\n    capsule: ./lead\n    store: postgres://murmur@db:5432/murmur?sslmode=disable\n    store_password: env:MUR_PG_PASSWORD\n    replicas: 3\n  - name: worker\n    capsule: ./worker\n"
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := roster.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	lead, _ := r.Member("lead")
	worker, _ := r.Member("worker")
	if lead.Store != "postgres://murmur@db:5432/murmur?sslmode=disable" || lead.StorePassword != "env:MUR_PG_PASSWORD" || worker.Store != "" || worker.StorePassword != "" {
		t.Errorf("lead's store %q (%q), worker's %q (%q)", lead.Store, lead.StorePassword, worker.Store, worker.StorePassword)
	}
	if lead.ReplicaCount() != 3 || worker.ReplicaCount() != 1 {
		t.Errorf("lead runs as %d replicas, worker as %d; want 3 and 1", lead.ReplicaCount(), worker.ReplicaCount())
	}
}

// replicas: takes every whole number from 1 to MaxReplicas; a member that does not say runs as one.
func TestMemberReplicas(t *testing.T) {
	dir := formationDir(t, "lead")
	path := filepath.Join(dir, "roster.yaml")
	for _, tc := range []struct {
		key  string
		want int
	}{{"", 1}, {"    replicas: 1\n", 1}, {"    replicas: 2\n", 2}, {"    replicas: 64\n", roster.MaxReplicas}} {
		body := "formation: f\nmembers:\n  - name: lead\n    capsule: ./lead\n" + tc.key
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		r, err := roster.Load(path)
		if err != nil {
			t.Fatalf("%q: %v", tc.key, err)
		}
		if got := r.Members[0].ReplicaCount(); got != tc.want {
			t.Errorf("%q: the member runs as %d replicas, want %d", tc.key, got, tc.want)
		}
	}
}
