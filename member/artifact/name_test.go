package artifact

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseRef(t *testing.T) {
	for _, tc := range []struct {
		in, want, err string
	}{
		{in: "local/tool-edit", want: "local/tool-edit"},
		{in: "local/tool_edit@1.2.3", want: "local/tool_edit@1.2.3"},
		{in: "a1/b2@1.0.0-rc.1", want: "a1/b2@1.0.0-rc.1"},
		{in: "", err: `the artifact name is empty; write scope/name, such as local/tool-edit`},
		{in: "tool-edit", err: `"tool-edit" is not a full artifact name: it has no scope; write scope/name, such as local/tool-edit`},
		{in: "Bash", err: `"Bash" is not a full artifact name: it has no scope; write scope/name, such as local/bash`},
		{in: "a/b/c", err: `"a/b/c" is not an artifact name: it has more than one /; write scope/name, such as local/tool-edit`},
		{in: "Local/x", err: `"Local/x" is not an artifact name: its scope "Local" must be 1 to 64 lowercase letters, digits, - and _, starting with a letter or digit; write scope/name, such as local/tool-edit`},
		{in: "local/..", err: `"local/.." is not an artifact name: its name ".." must be 1 to 64 lowercase letters, digits, - and _, starting with a letter or digit; write scope/name, such as local/tool-edit`},
		{in: "local/a.b", err: `"local/a.b" is not an artifact name: its name "a.b" must be 1 to 64 lowercase letters, digits, - and _, starting with a letter or digit; write scope/name, such as local/tool-edit`},
		{in: "/x", err: `"/x" is not an artifact name: its scope "" must be 1 to 64 lowercase letters, digits, - and _, starting with a letter or digit; write scope/name, such as local/tool-edit`},
		{in: "local/x@1.0", err: `"local/x@1.0" has no valid version: "1.0" is not a full semantic version; write MAJOR.MINOR.PATCH, such as local/x@1.0.0`},
		{in: "local/x@v1.2.3", err: `"local/x@v1.2.3" has no valid version: "v1.2.3" starts with a v; write MAJOR.MINOR.PATCH, such as local/x@1.2.3`},
		{in: "local/x@1.2.3+build", err: `"local/x@1.2.3+build" has no valid version: "1.2.3+build" carries +build metadata, which semver ignores in ordering; write MAJOR.MINOR.PATCH, such as local/x@1.2.3`},
		{in: "local/x@01.2.3", err: `"local/x@01.2.3" has no valid version: "01.2.3" is not a full semantic version; write MAJOR.MINOR.PATCH, such as local/x@1.0.0`},
		{in: "local/x@", err: `"local/x@" has no valid version: the version is empty; write MAJOR.MINOR.PATCH, such as local/x@1.0.0`},
	} {
		ref, err := ParseRef(tc.in)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err || !errors.Is(err, ErrBadName) {
				t.Errorf("ParseRef(%q) = %v, %v\nwant error %s", tc.in, ref, err, tc.err)
			}
			continue
		}
		if err != nil || ref.String() != tc.want {
			t.Errorf("ParseRef(%q) = %v, %v; want %s", tc.in, ref, err, tc.want)
		}
	}
}

func TestParseNameRefusesVersion(t *testing.T) {
	_, err := ParseName("local/x@1.0.0")
	want := `"local/x@1.0.0" names a version where only a full name is wanted; write local/x without @1.0.0`
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %s", err, want)
	}
	n, err := ParseName("local/tool-edit")
	if err != nil || n.Scope() != "local" || n.Tool() != "tool-edit" {
		t.Fatalf("ParseName = %q (%q, %q), %v", n, n.Scope(), n.Tool(), err)
	}
}

func TestPatterns(t *testing.T) {
	names := []Name{"local/bash", "local/tool-edit", "locale/x", "acme/fmt"}
	for _, tc := range []struct {
		pattern string
		match   []Name
		err     string
	}{
		{pattern: "local/*", match: []Name{"local/bash", "local/tool-edit"}},
		{pattern: "local/tool-*", match: []Name{"local/tool-edit"}},
		{pattern: "local*", match: []Name{"local/bash", "local/tool-edit", "locale/x"}},
		{pattern: "*", match: names},
		{pattern: "acme/fmt", match: []Name{"acme/fmt"}},
		{pattern: "acme/fm", match: nil},
		{pattern: "local/*/x*", err: `"local/*/x*" is not an artifact pattern: * may only end it; write a full name, or a scope with * such as local/*`},
		{pattern: "/*", err: `"/*" is not an artifact pattern: it has no scope before the /; write a full name, or a scope with * such as local/*`},
		{pattern: "Local/*", err: `"Local/*" is not an artifact pattern: its scope "Local" must be lowercase letters, digits, - and _; write a full name, or a scope with * such as local/*`},
		{pattern: "local", err: `"local" is not a full artifact name: it has no scope; write scope/name, such as local/local`},
	} {
		p, err := ParsePattern(tc.pattern)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("ParsePattern(%q) err = %v, want %s", tc.pattern, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("ParsePattern(%q): %v", tc.pattern, err)
		}
		var got []Name
		for _, n := range names {
			if p.Match(n) {
				got = append(got, n)
			}
		}
		if diff := cmp.Diff(tc.match, got); diff != "" {
			t.Errorf("%s matches (-want +got):\n%s", tc.pattern, diff)
		}
	}
}

func TestPatternOverlaps(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"local/*", "local/bash", true},
		{"local/bash", "local/*", true},
		{"local/*", "acme/*", false},
		{"local/t*", "local/*", true},
		{"local/t*", "local/b*", false},
		{"*", "acme/fmt", true},
		{"acme/fmt", "acme/fmt", true},
		{"acme/fmt", "acme/fmt2", false},
		{"acme/*", "acme/fmt", true},
		{"other/*", "local/x", false},
	} {
		a, _ := ParsePattern(tc.a)
		b, _ := ParsePattern(tc.b)
		if got := a.Overlaps(b); got != tc.want {
			t.Errorf("%s overlaps %s = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestVersionOrder(t *testing.T) {
	vs := []string{"1.0.0", "1.10.0", "1.2.0", "2.0.0-rc.1", "1.2.0-alpha", "0.9.9", "1.2.0-beta.2", "1.2.0-beta.10"}
	SortVersions(vs)
	want := []string{"1.10.0", "1.2.0", "1.0.0", "0.9.9", "2.0.0-rc.1", "1.2.0-beta.10", "1.2.0-beta.2", "1.2.0-alpha"}
	if diff := cmp.Diff(want, vs); diff != "" {
		t.Errorf("SortVersions (-want +got):\n%s", diff)
	}
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"1.2.0", "1.10.0", -1}, {"1.0.0", "1.0.0", 0}, {"1.0.0-rc.1", "1.0.0", -1}, {"2.0.0", "1.99.99", 1},
		{"1.0.0-alpha.1", "1.0.0-alpha.beta", -1},
	} {
		if got := CompareVersions(tc.a, tc.b); got != tc.want {
			t.Errorf("CompareVersions(%s, %s) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
	for v, ok := range map[string]bool{"1.0.0": true, "1.0": false, "v1.0.0": false, "1.0.0+x": false, "1.0.0-rc.1": true, "": false} {
		if ValidVersion(v) != ok {
			t.Errorf("ValidVersion(%q) = %v, want %v", v, !ok, ok)
		}
	}
}
