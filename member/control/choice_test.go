package control_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/murmur-run/murmur/member/capsule"
	"github.com/murmur-run/murmur/member/control"
	"github.com/murmur-run/murmur/runtimetools"
)

// inference declares the choices fast, smart and local, in that order, not the alphabet's.
var inference = &capsule.Inference{Driver: "fast", ChoiceOrder: []string{"fast", "smart", "local"},
	Choices: map[string]capsule.Choice{
		"fast":  {Driver: "openai", Model: "gpt-small"},
		"smart": {Driver: "anthropic", Model: "claude-big"},
		"local": {Driver: "script"},
	}}

// declared is a check that refuses a choice inference does not declare.
func declared(name string) error {
	if _, ok := inference.Choices[name]; !ok {
		return fmt.Errorf("no driver choice %q", name)
	}
	return nil
}

// next is what one Choice.Next returned.
type next struct {
	Choice  string
	Applied bool
}

func TestChoicesInDeclarationOrder(t *testing.T) {
	want := []runtimetools.ChoiceInfo{
		{Name: "fast", Driver: "openai", Model: "gpt-small"},
		{Name: "smart", Driver: "anthropic", Model: "claude-big"},
		{Name: "local", Driver: "script"},
	}
	if diff := cmp.Diff(want, control.NewChoice("fast", inference, declared).Choices()); diff != "" {
		t.Errorf("Choices() (-want +got):\n%s", diff)
	}
	// The same six choices declared in two orders: no order of the map's can pass for both.
	choices := map[string]capsule.Choice{}
	for _, name := range []string{"a", "b", "c", "d", "e", "f"} {
		choices[name] = capsule.Choice{Driver: "script"}
	}
	for _, order := range [][]string{{"c", "a", "f", "b", "e", "d"}, {"d", "e", "b", "f", "a", "c"}} {
		var got []string
		for _, ch := range control.NewChoice("", &capsule.Inference{Choices: choices, ChoiceOrder: order}, declared).Choices() {
			got = append(got, ch.Name)
		}
		if diff := cmp.Diff(order, got); diff != "" {
			t.Errorf("Choices() names (-want +got):\n%s", diff)
		}
	}
}

func TestChoiceSwitch(t *testing.T) {
	for _, tc := range []struct {
		name        string
		switches    []string
		wantErr     []bool
		wantCurrent string
		wantNext    []next // the Next calls after the switches
	}{
		{"no switch", nil, nil, "fast", []next{{"fast", false}}},
		{"a switch is applied by the next call only", []string{"smart"}, []bool{false}, "smart", []next{{"smart", true}, {"smart", false}}},
		{"a refused switch changes nothing", []string{"nowhere"}, []bool{true}, "fast", []next{{"fast", false}}},
		{"a switch to the current choice is no switch", []string{"fast"}, []bool{false}, "fast", []next{{"fast", false}}},
		{"the last of two switches is applied once", []string{"smart", "local"}, []bool{false, false}, "local", []next{{"local", true}, {"local", false}}},
		{"a refused switch keeps an earlier one unapplied", []string{"smart", "nowhere"}, []bool{false, true}, "smart", []next{{"smart", true}, {"smart", false}}},
		{"a repeated switch is applied once", []string{"smart", "smart"}, []bool{false, false}, "smart", []next{{"smart", true}, {"smart", false}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := control.NewChoice("fast", inference, declared)
			for i, name := range tc.switches {
				if err := c.Switch(name); (err != nil) != tc.wantErr[i] {
					t.Errorf("Switch(%q) = %v, want an error: %v", name, err, tc.wantErr[i])
				}
			}
			if got := c.Current(); got != tc.wantCurrent {
				t.Errorf("Current() = %q, want %q", got, tc.wantCurrent)
			}
			var got []next
			for range tc.wantNext {
				choice, applied := c.Next()
				got = append(got, next{choice, applied})
			}
			if diff := cmp.Diff(tc.wantNext, got); diff != "" {
				t.Errorf("Next() in turn (-want +got):\n%s", diff)
			}
		})
	}
}

func TestChoiceSwitchReturnsTheChecksError(t *testing.T) {
	refused := errors.New("its credential produces no value")
	c := control.NewChoice("fast", inference, func(string) error { return refused })
	if err := c.Switch("smart"); !errors.Is(err, refused) {
		t.Errorf("Switch = %v, want the check's %v", err, refused)
	}
}

func TestChoiceSwitchBackAfterAnAppliedSwitch(t *testing.T) {
	c := control.NewChoice("fast", inference, declared)
	var got []next
	for _, name := range []string{"smart", "fast"} {
		if err := c.Switch(name); err != nil {
			t.Fatal(err)
		}
		choice, applied := c.Next()
		got = append(got, next{choice, applied})
	}
	if diff := cmp.Diff([]next{{"smart", true}, {"fast", true}}, got); diff != "" {
		t.Errorf("Next() after each switch (-want +got):\n%s", diff)
	}
}

// TestChoiceConcurrentSwitchesAndReads switches from one goroutine while others read and take the
// next choice: each switch is reported applied at most once, and every read is a declared choice.
func TestChoiceConcurrentSwitchesAndReads(t *testing.T) {
	const switches = 500
	c := control.NewChoice("fast", inference, declared)
	var applied atomic.Int32
	stop := make(chan struct{})
	var readers sync.WaitGroup
	for range 3 {
		readers.Go(func() {
			for {
				choice, ok := c.Next()
				if ok {
					applied.Add(1)
				}
				if declared(choice) != nil || declared(c.Current()) != nil {
					t.Errorf("read an undeclared choice %q", choice)
					return
				}
				select {
				case <-stop:
					return
				default:
				}
			}
		})
	}
	var switcher sync.WaitGroup
	switcher.Go(func() {
		for i := range switches {
			if err := c.Switch([]string{"smart", "local"}[i%2]); err != nil {
				t.Error(err)
				return
			}
			c.Choices()
		}
	})
	switcher.Wait()
	close(stop)
	readers.Wait()

	if _, ok := c.Next(); ok {
		applied.Add(1)
	}
	if n := applied.Load(); n < 1 || n > switches {
		t.Errorf("%d switches reported applied, want between 1 and %d", n, switches)
	}
	if got := c.Current(); got != "local" {
		t.Errorf("Current() = %q after the last switch, want local", got)
	}
}
