package artifact

import (
	"fmt"
	"path/filepath"
	"strings"
)

// Skill is a skill artifact's text as it joins the system prompt.
type Skill struct {
	Name   Name
	Text   string
	Origin Origin
}

// ReadSkill reads the text of the skill artifact a, pinned by origin.
func ReadSkill(a *Artifact, origin Origin) (Skill, error) {
	m := a.Manifest
	if m.Runtime != RuntimeSkill {
		return Skill{}, fmt.Errorf("%s is a %s, not a skill", m.Name, m.Runtime)
	}
	data, err := readRegular(filepath.Join(a.Dir, filepath.FromSlash(m.Text)), MaxSkillBytes)
	if err != nil {
		return Skill{}, err
	}
	return Skill{Name: m.Name, Text: string(data), Origin: origin}, nil
}

// Section returns the skill as the system prompt carries it: a "## Skill: <name>" heading and the text;
// for a skill the agent pulled (origin agent), the text fenced as untrusted under skill:<name>, the way
// the runtime fences every text it did not vet. Inside the fence, the fence's own markers are defused
// (their "<" written "&lt;"), so the text cannot close the fence early.
func (s Skill) Section() string {
	var b strings.Builder
	b.WriteString("## Skill: ")
	b.WriteString(string(s.Name))
	b.WriteString("\n\n")
	text := strings.TrimRight(s.Text, "\n")
	if s.Origin == OriginOperator {
		b.WriteString(text)
		b.WriteByte('\n')
		return b.String()
	}
	text = strings.ReplaceAll(text, "<untrusted-content", "&lt;untrusted-content")
	text = strings.ReplaceAll(text, "</untrusted-content", "&lt;/untrusted-content")
	b.WriteString("<untrusted-content source=skill:")
	b.WriteString(string(s.Name))
	b.WriteString(">\n")
	b.WriteString(text)
	b.WriteString("\n</untrusted-content>\n")
	return b.String()
}

// AppendSkills returns prompt followed by each skill's Section, in the order given, separated by blank
// lines; prompt unchanged when there is no skill.
func AppendSkills(prompt string, skills []Skill) string {
	if len(skills) == 0 {
		return prompt
	}
	var b strings.Builder
	b.WriteString(strings.TrimRight(prompt, "\n"))
	for i, s := range skills {
		switch {
		case i > 0:
			b.WriteString("\n") // the section before ends its last line
		case b.Len() > 0:
			b.WriteString("\n\n")
		}
		b.WriteString(s.Section())
	}
	return b.String()
}
