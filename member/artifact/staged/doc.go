// Package staged is what one session holds of artifacts (DESIGN §10): the tool artifacts murmur.yaml
// declares and those the agent pulled, the dispatch allowlist, the operator's skills, the policy hooks
// and the WebAssembly runner that answers tool calls and runs WebAssembly hooks. Stage resolves, verifies
// and pins what murmur.yaml declares and copies it into the session's runtime directory; the Set it
// returns answers the session core's questions: which tools the model sees (ToolSpecs), whether a name is
// a tool artifact (Tool), one call of it (Run), and what the hooks say of a tool call or a task's end.
// WriteManifests writes the runtime-provided tools' murmur.yaml files beside the artifacts' own.
//
// Contract: a Set is safe for concurrent use once Stage has returned; a nil *Set is a session with no
// artifacts and answers every question with "none". Close frees the compiled modules and the hooks'
// copies, once no call runs any more. Records go through the Recorder of the Config; nothing is read
// from package state.
//
// The package takes a Config of plain values and callbacks: it must not import the session core
// (member), nor member/calls, member/store or member/share.
package staged
