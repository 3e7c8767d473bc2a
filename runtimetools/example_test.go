package runtimetools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/murmur-run/murmur/runtimetools"
)

// upper is a tool of one's own: a Manifest and a Run, nothing else.
type upper struct{}

func (upper) Manifest() runtimetools.Manifest {
	return runtimetools.NativeManifest("upper", "Returns the text in capitals.",
		json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`))
}

func (upper) Run(_ context.Context, call runtimetools.Call) (runtimetools.Result, error) {
	var in struct {
		Text *string `json:"text"`
	}
	if json.Unmarshal(call.Input, &in) != nil || in.Text == nil {
		// A bad call is the model's mistake: it is refused with a sentence the model can act on, not an error.
		return runtimetools.Refused(`'upper' needs {"text": "<text>"}.`), nil
	}
	return runtimetools.Result{Status: runtimetools.StatusOK, Output: strings.ToUpper(*in.Text), Summary: "Upper-cased"}, nil
}

// A session's registry is built from the tools its capsule is granted, explicitly, and passed to the
// agent loop, which dispatches each call by name.
func ExampleNewRegistry() {
	reg, err := runtimetools.NewRegistry(upper{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("staged:", reg.Names())

	for _, call := range []runtimetools.Call{
		{ID: "call_1_1", Name: "upper", Input: json.RawMessage(`{"text":"hello"}`)},
		{ID: "call_1_2", Name: "upper", Input: json.RawMessage(`{"txt":"hello"}`)},
		{ID: "call_1_3", Name: "delegate-task", Input: json.RawMessage(`{}`)},
	} {
		tool, ok := reg.Lookup(call.Name)
		if !ok {
			fmt.Println(call.ID, runtimetools.StatusRefused, runtimetools.Unstaged(call.Name, reg.Names()))
			continue
		}
		res, err := tool.Run(context.Background(), call)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(call.ID, res.Status, res.Output)
	}
	// Output:
	// staged: [upper]
	// call_1_1 ok HELLO
	// call_1_2 refused 'upper' needs {"text": "<text>"}.
	// call_1_3 refused delegate-task is not available in this session: it exists only when the capsule declares capabilities.spawn.allow, and this capsule does not.
}

// Every runtime-provided tool's manifest has version 0.0.0, runtime tool and implementation native, as
// SPEC fixes; staging writes it to tools/<name>/murmur.yaml.
func ExampleNativeManifest() {
	m := runtimetools.NativeManifest("upper", "Returns the text in capitals.",
		json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`))
	out, _ := json.MarshalIndent(m, "", "  ")
	fmt.Println(string(out))
	// Output:
	// {
	//   "name": "upper",
	//   "version": "0.0.0",
	//   "runtime": "tool",
	//   "implementation": "native",
	//   "description": "Returns the text in capitals.",
	//   "input_schema": {
	//     "type": "object",
	//     "properties": {
	//       "text": {
	//         "type": "string"
	//       }
	//     },
	//     "required": [
	//       "text"
	//     ]
	//   }
	// }
}

// The grant is the tool's existence: a call naming a tool that was not staged is refused with the
// declaration that would stage it, or, for any other name, with what the session can call.
func ExampleUnstaged() {
	inventory := []string{"session-status", "call-member"}
	fmt.Println(runtimetools.Unstaged("fetch-peer-file", inventory))
	fmt.Println(runtimetools.Unstaged("bash", inventory))
	// Output:
	// fetch-peer-file is not available in this session: it exists only when the capsule declares capabilities.peer_fetch, and this capsule does not.
	// no tool named "bash" in this session: a shell binary needs capabilities.shell.allow, an artifact needs tools: in murmur.yaml. Tools you can call: call-member, session-status.
}

// No artifact may take the name of a runtime-provided tool, whatever its publisher or version.
func ExampleReserved() {
	for _, name := range []string{"session-status", "acme/call-member@1.0.0", "acme/translate"} {
		fmt.Println(name, runtimetools.Reserved(name))
	}
	// Output:
	// session-status true
	// acme/call-member@1.0.0 true
	// acme/translate false
}

// members stands in for the session: call-member declares the little it needs of it as MemberCaller.
type members struct{}

func (members) Callable() []string { return []string{"writer", "critic"} }

func (members) CallMember(_ context.Context, task, member, text string) (runtimetools.CallStart, error) {
	return runtimetools.CallStart{CallID: "mcl-1", Member: member, Status: "started", TaskID: "tsk-7"}, nil
}

// call-member offers the members the roster lets this one call as the enum of its input, and answers a
// started call with data fenced for the model and a note telling it to end its turn.
func ExampleCallMember() {
	tool := &runtimetools.CallMember{Members: members{}}
	fmt.Println(string(tool.Manifest().InputSchema))

	res, err := tool.Run(context.Background(), runtimetools.Call{
		ID: "call_1_1", Name: "call-member", Task: "tsk-1",
		Input: json.RawMessage(`{"member":"writer","task":"draft the release notes"}`),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Status, res.Output)
	fmt.Println(res.Summary)
	first, _, _ := strings.Cut(res.Note, ". ")
	fmt.Println(first + ".")

	refused, _ := tool.Run(context.Background(), runtimetools.Call{Input: json.RawMessage(`{"member":"writer"}`)})
	fmt.Println(refused.Status, refused.Output)
	// Output:
	// {"properties":{"member":{"description":"the formation member to hand the task to","enum":["writer","critic"],"type":"string"},"task":{"description":"the whole of what the member is told","type":"string"}},"required":["member","task"],"type":"object"}
	// ok {"call_id":"mcl-1","member":"writer","status":"started","task_id":"tsk-7"}
	// Called writer: started
	// [call-member] writer is now working on call mcl-1.
	// refused 'call-member' needs {"member": "<name>", "task": "<text>"}, both required.
}
