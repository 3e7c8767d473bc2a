package roster

import (
	"strconv"
	"strings"
)

// Error is one problem in a roster.yaml: where it is, what is wrong, and what to write instead.
type Error struct {
	File string
	Line int // 0 when the problem concerns the whole file
	Msg  string
	Fix  string
}

// Error formats e as FILE:LINE: MSG; FIX, leaving out the line when it is 0 and the fix when it is empty.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(e.Line))
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	if e.Fix != "" {
		b.WriteString("; ")
		b.WriteString(e.Fix)
	}
	return b.String()
}
