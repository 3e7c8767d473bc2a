package a2a

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// EventReader reads a door's text/event-stream one event at a time: the data of each event (its "data:"
// lines joined), skipping comments, keep-alives and other fields. The console and mur's client read
// streams through it.
type EventReader struct {
	rd   *bufio.Reader
	max  int
	data bytes.Buffer
	long []byte
}

// NewEventReader reads events from r; an event (or a line) longer than max bytes is an error.
func NewEventReader(r io.Reader, max int) *EventReader {
	return &EventReader{rd: bufio.NewReaderSize(r, 64<<10), max: max}
}

// Next returns the next event's data, valid until the next call. It returns io.EOF when the stream
// ends (an event the end cut short is dropped), and an error for an event over the limit.
func (e *EventReader) Next() ([]byte, error) {
	e.data.Reset()
	for {
		line, err := e.line()
		if err != nil {
			return nil, err
		}
		switch {
		case bytes.HasPrefix(line, []byte("data:")):
			if e.data.Len()+len(line) > e.max {
				return nil, fmt.Errorf("a stream event over %d bytes", e.max)
			}
			e.data.Write(bytes.TrimPrefix(bytes.TrimPrefix(line, []byte("data:")), []byte(" ")))
		case len(line) == 0 && e.data.Len() > 0:
			return e.data.Bytes(), nil
		}
	}
}

// line reads one line without its end of line, whatever its length up to the limit.
func (e *EventReader) line() ([]byte, error) {
	e.long = e.long[:0]
	for {
		part, err := e.rd.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			if len(e.long)+len(part) > e.max {
				return nil, fmt.Errorf("a stream line over %d bytes", e.max)
			}
			e.long = append(e.long, part...)
			continue
		}
		if err != nil {
			return nil, err
		}
		if len(e.long) > 0 {
			part = append(e.long, part...)
		}
		return bytes.TrimRight(part, "\r\n"), nil
	}
}
