// Package docscheck checks the repository's Markdown documents the way a reader meets them on GitHub:
// every relative link names a file that exists and, when it names an anchor, a heading of that file
// (or an explicit HTML anchor) that GitHub would give that anchor.
package docscheck

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
)

// Link is one link of a document.
type Link struct {
	File   string // the document holding it
	Line   int    // 1-based
	Target string // as written: path, path#anchor or #anchor
}

// Problem is a link whose target is missing.
type Problem struct {
	Link
	Why string
}

func (p Problem) String() string {
	return fmt.Sprintf("%s:%d: %s: %s", p.File, p.Line, p.Target, p.Why)
}

var (
	linkRE     = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	codeSpanRE = regexp.MustCompile("`+[^`]*`+")
	headingRE  = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	htmlIDRE   = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
	mdLinkRE   = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// lines returns the lines of a document outside fenced code blocks, with their 1-based numbers; a line
// inside a fence is returned empty, so numbers stay true.
func lines(text string) []string {
	all := strings.Split(text, "\n")
	fence := ""
	for i, l := range all {
		t := strings.TrimSpace(l)
		if fence != "" {
			if strings.HasPrefix(t, fence) {
				fence = ""
			}
			all[i] = ""
			continue
		}
		if strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") {
			fence = t[:3]
			all[i] = ""
		}
	}
	return all
}

// Slug is GitHub's anchor for a heading's text: the rendered text in lower case, with every character
// that is not a letter, a digit, a space, '-' or '_' removed and spaces made hyphens.
func Slug(heading string) string {
	heading = mdLinkRE.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Anchors returns every anchor a document defines: its headings' slugs (a repeated slug gets -1, -2, …
// as GitHub numbers them) and explicit <a name> or <a id> anchors.
func Anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, l := range lines(text) {
		for _, m := range htmlIDRE.FindAllStringSubmatch(l, -1) {
			out[m[1]] = true
		}
		m := headingRE.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		s := Slug(m[2])
		if n := seen[s]; n > 0 {
			out[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	return out
}

// Links returns the relative links of the document at file (links to other sites, mail and code spans
// are left out).
func Links(file, text string) []Link {
	var out []Link
	for i, l := range lines(text) {
		l = codeSpanRE.ReplaceAllString(l, "")
		for _, m := range linkRE.FindAllStringSubmatch(l, -1) {
			t := m[1]
			if strings.Contains(t, "://") || strings.HasPrefix(t, "mailto:") {
				continue
			}
			out = append(out, Link{File: file, Line: i + 1, Target: t})
		}
	}
	return out
}

// Check reads each document and returns every relative link whose file or anchor is missing. A link
// is resolved against its document's directory, as GitHub resolves it.
func Check(files []string) ([]Problem, error) {
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) (map[string]bool, error) {
		if a, ok := anchors[path]; ok {
			return a, nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		anchors[path] = Anchors(string(b))
		return anchors[path], nil
	}
	var problems []Problem
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		for _, l := range Links(f, string(b)) {
			path, anchor, _ := strings.Cut(l.Target, "#")
			target := f
			if path != "" {
				target = filepath.Join(filepath.Dir(f), filepath.FromSlash(path))
				st, err := os.Stat(target)
				if err != nil {
					problems = append(problems, Problem{l, "no such file"})
					continue
				}
				if st.IsDir() || !strings.HasSuffix(target, ".md") {
					if anchor != "" {
						problems = append(problems, Problem{l, "an anchor into a file that is not Markdown"})
					}
					continue
				}
			}
			if anchor == "" {
				continue
			}
			a, err := anchorsOf(target)
			if err != nil {
				return nil, err
			}
			if !a[anchor] {
				problems = append(problems, Problem{l, fmt.Sprintf("no heading in %s has the anchor #%s", filepath.Base(target), anchor)})
			}
		}
	}
	return problems, nil
}
