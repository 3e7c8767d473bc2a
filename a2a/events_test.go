package a2a

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func TestEventReader(t *testing.T) {
	stream := ": keep-alive\n\nevent: x\ndata: {\"a\":\ndata: 1}\n\r\n" + "data: " + strings.Repeat("b", 70<<10) + "\n\n" + "data: cut short"
	e := NewEventReader(strings.NewReader(stream), 100<<10)
	for _, want := range []string{`{"a":1}`, strings.Repeat("b", 70<<10)} {
		got, err := e.Next()
		if err != nil || string(got) != want {
			t.Fatalf("Next = %.40q %v, want %.40q", got, err, want)
		}
	}
	if _, err := e.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("an event the end cut short: %v, want io.EOF", err)
	}
	big := NewEventReader(strings.NewReader("data: "+strings.Repeat("c", 200)+"\n\n"), 100)
	if _, err := big.Next(); err == nil || !strings.Contains(err.Error(), "over 100 bytes") {
		t.Fatalf("an event over the limit: %v", err)
	}
}
