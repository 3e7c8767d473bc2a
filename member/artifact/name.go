package artifact

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"golang.org/x/mod/semver"
)

// Name is an artifact's full name, scope/name, such as local/tool-edit. A Name from ParseName is valid.
type Name string

// Scope returns the part before the '/'.
func (n Name) Scope() string {
	s, _, _ := strings.Cut(string(n), "/")
	return s
}

// Tool returns the part after the '/': the name the model calls a tool by, and the name checked against
// the reserved runtime-provided tool names.
func (n Name) Tool() string {
	_, t, _ := strings.Cut(string(n), "/")
	return t
}

// Ref is a full name with a version (scope/name@version, a pin), or without one (Version ""): then it
// asks for the newest version that fits.
type Ref struct {
	Name    Name
	Version string
}

// String writes r as scope/name or scope/name@version.
func (r Ref) String() string {
	if r.Version == "" {
		return string(r.Name)
	}
	return string(r.Name) + "@" + r.Version
}

// ErrBadName is matched (errors.Is) by every *NameError.
var ErrBadName = errors.New("not an artifact name")

// NameError says why a text is not an artifact name, version or pattern, and what to write instead.
type NameError struct {
	Value string
	Msg   string
	Fix   string
}

func (e *NameError) Error() string { return e.Msg + "; " + e.Fix }

// Is makes errors.Is(err, ErrBadName) true.
func (e *NameError) Is(target error) bool { return target == ErrBadName }

// maxPartLen bounds a scope and a name: a tool name must stay within what model APIs accept (64).
const maxPartLen = 64

// partRE is a scope or a name: lowercase, so a name means one directory on every file system, and
// without dots, so it is never "." or ".." and is a valid tool name for every model API.
var partRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

const nameExample = "such as local/tool-edit"

// ParseName validates s as a full name, scope/name.
func ParseName(s string) (Name, error) {
	if i := strings.IndexByte(s, '@'); i >= 0 {
		return "", &NameError{s, fmt.Sprintf("%q names a version where only a full name is wanted", s),
			"write " + s[:i] + " without @" + s[i+1:]}
	}
	return parseName(s)
}

func parseName(s string) (Name, error) {
	bad := func(why string) error {
		return &NameError{s, fmt.Sprintf("%q is not an artifact name: %s", s, why), "write scope/name, " + nameExample}
	}
	if s == "" {
		return "", &NameError{s, "the artifact name is empty", "write scope/name, " + nameExample}
	}
	scope, name, ok := strings.Cut(s, "/")
	switch {
	case !ok:
		return "", &NameError{s, fmt.Sprintf("%q is not a full artifact name: it has no scope", s),
			"write scope/name, such as local/" + sanitizeExample(s)}
	case strings.Contains(name, "/"):
		return "", bad("it has more than one /")
	}
	for _, p := range [][2]string{{"scope", scope}, {"name", name}} {
		if !partRE.MatchString(p[1]) || len(p[1]) > maxPartLen {
			return "", bad(fmt.Sprintf("its %s %q must be 1 to %d lowercase letters, digits, - and _, starting with a letter or digit",
				p[0], p[1], maxPartLen))
		}
	}
	return Name(s), nil
}

// sanitizeExample turns a bare name into one an example may show.
func sanitizeExample(s string) string {
	s = strings.ToLower(s)
	if partRE.MatchString(s) && len(s) <= maxPartLen {
		return s
	}
	return "tool-edit"
}

// ParseRef validates s as scope/name or scope/name@version.
func ParseRef(s string) (Ref, error) {
	name, version, pinned := strings.Cut(s, "@")
	n, err := parseName(name)
	if err != nil {
		return Ref{}, err
	}
	if !pinned {
		return Ref{Name: n}, nil
	}
	if err := checkVersion(version); err != nil {
		var ne *NameError
		errors.As(err, &ne)
		return Ref{}, &NameError{s, fmt.Sprintf("%q has no valid version: %s", s, ne.Msg), versionFix(string(n), version)}
	}
	return Ref{Name: n, Version: version}, nil
}

// ValidVersion reports whether v is a full semantic version as artifacts write it: MAJOR.MINOR.PATCH
// with an optional -prerelease, no leading v, no +build metadata (two copies differing only there would
// be the same version to semver yet two directories in a store).
func ValidVersion(v string) bool { return checkVersion(v) == nil }

func checkVersion(v string) error {
	bad := func(why string) error { return &NameError{v, why, versionFix("", v)} }
	switch {
	case v == "":
		return bad("the version is empty")
	case strings.HasPrefix(v, "v") || strings.HasPrefix(v, "V"):
		return bad(fmt.Sprintf("%q starts with a v", v))
	case strings.Contains(v, "+"):
		return bad(fmt.Sprintf("%q carries +build metadata, which semver ignores in ordering", v))
	case len(v) > 128:
		return bad("the version is longer than 128 characters")
	case !semver.IsValid("v"+v) || semver.Canonical("v"+v) != "v"+v:
		return bad(fmt.Sprintf("%q is not a full semantic version", v))
	}
	return nil
}

// versionFix says how to write a version, with the name when there is one.
func versionFix(name, v string) string {
	good := "1.0.0"
	if c := semver.Canonical("v" + strings.TrimLeft(v, "vV")); c != "" {
		good = strings.TrimPrefix(c, "v")
	}
	if name != "" {
		return fmt.Sprintf("write MAJOR.MINOR.PATCH, such as %s@%s", name, good)
	}
	return "write MAJOR.MINOR.PATCH, such as " + good
}

// CompareVersions orders two valid versions as semver does: -1, 0 or +1.
func CompareVersions(a, b string) int { return semver.Compare("v"+a, "v"+b) }

// SortVersions orders valid versions newest first, in the order a pull without a version tries them:
// every release newest first, then every prerelease newest first, so that a prerelease is taken only
// when no release is held (as go get does).
func SortVersions(vs []string) {
	slices.SortStableFunc(vs, func(a, b string) int {
		pa, pb := semver.Prerelease("v"+a) != "", semver.Prerelease("v"+b) != ""
		if pa != pb {
			if pa {
				return 1
			}
			return -1
		}
		return CompareVersions(b, a)
	})
}

// Pattern is an entry of capabilities.install (a grant) or the artifact pull-artifact lists: a full name,
// or a prefix of one ending in '*' (local/*, local/tool-*, *).
type Pattern struct {
	text   string
	prefix string // the text before '*' when wild; the full name otherwise
	wild   bool
}

// ParsePattern validates s as a pattern.
func ParsePattern(s string) (Pattern, error) {
	prefix, wild := strings.CutSuffix(s, "*")
	if !wild {
		n, err := ParseName(s)
		if err != nil {
			return Pattern{}, err
		}
		return Pattern{text: s, prefix: string(n)}, nil
	}
	bad := func(why string) error {
		return &NameError{s, fmt.Sprintf("%q is not an artifact pattern: %s", s, why),
			"write a full name, or a scope with * such as local/*"}
	}
	if strings.Contains(prefix, "*") {
		return Pattern{}, bad("* may only end it")
	}
	scope, name, slash := strings.Cut(prefix, "/")
	switch {
	case strings.Contains(name, "/"):
		return Pattern{}, bad("it has more than one /")
	case scope != "" && !partRE.MatchString(scope), len(scope) > maxPartLen:
		return Pattern{}, bad(fmt.Sprintf("its scope %q must be lowercase letters, digits, - and _", scope))
	case slash && scope == "":
		return Pattern{}, bad("it has no scope before the /")
	case name != "" && !partRE.MatchString(name), len(name) > maxPartLen:
		return Pattern{}, bad(fmt.Sprintf("its name part %q must be lowercase letters, digits, - and _", name))
	}
	return Pattern{text: s, prefix: prefix, wild: true}, nil
}

// IsPattern reports whether an artifact asked for is a pattern to list rather than a name to pull: it
// ends in '*'.
func IsPattern(s string) bool { return strings.HasSuffix(s, "*") }

// String returns the pattern as written.
func (p Pattern) String() string { return p.text }

// Match reports whether p names n.
func (p Pattern) Match(n Name) bool {
	if p.wild {
		return strings.HasPrefix(string(n), p.prefix)
	}
	return string(n) == p.prefix
}

// Overlaps reports whether some full name matches both p and q: whether a listing of p can reach
// anything a grant entry q names.
func (p Pattern) Overlaps(q Pattern) bool {
	switch {
	case p.wild && q.wild:
		return strings.HasPrefix(p.prefix, q.prefix) || strings.HasPrefix(q.prefix, p.prefix)
	case p.wild:
		return strings.HasPrefix(q.prefix, p.prefix)
	case q.wild:
		return strings.HasPrefix(p.prefix, q.prefix)
	}
	return p.prefix == q.prefix
}

// ParsePatterns validates a list of patterns, such as capabilities.install.tool, reporting each bad
// entry with its index.
func ParsePatterns(list []string) ([]Pattern, error) {
	out := make([]Pattern, 0, len(list))
	var errs []error
	for i, s := range list {
		p, err := ParsePattern(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("entry %d: %w", i, err))
			continue
		}
		out = append(out, p)
	}
	return out, errors.Join(errs...)
}
