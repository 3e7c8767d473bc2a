package conv

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
)

// SemconvVersion is the version of the semantic conventions murmur's spans follow; SchemaURL its schema.
const (
	SemconvVersion = "1.41.0"
	SchemaURL      = semconv.SchemaURL
)

// TracerName is the instrumentation scope of every span murmur starts.
const TracerName = "github.com/murmur-run/murmur"

// Propagator is the propagator of every hop: W3C Trace Context (traceparent, tracestate) and Baggage.
// Murmur's own hops use it whatever the global propagator is, so a member passes its caller's trace on
// even with tracing off.
func Propagator() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}

// The A2A attributes, which the semantic conventions do not define yet (A2A names them in its
// protocol's "Enterprise-ready features"): the task a request or a run is about, its state and its
// context.
const (
	A2ATaskID    = attribute.Key("a2a.task.id")
	A2ATaskState = attribute.Key("a2a.task.state")
	A2AContextID = attribute.Key("a2a.context.id")
)

// Murmur's own attributes.
const (
	// Member is the formation member whose span it is (the process of mur run serves every member).
	Member = attribute.Key("murmur.member")
	// CallID is a call-member call's id (mcl_…); CalledMember the member it calls.
	CallID       = attribute.Key("murmur.call.id")
	CalledMember = attribute.Key("murmur.call.member")
	// DriverChoice is the capsule's driver choice an inference call went to.
	DriverChoice = attribute.Key("murmur.driver.choice")
	// Turns is how many inference calls a task run made.
	Turns = attribute.Key("murmur.turns")
	// ToolStatus is a tool call's status: ok, error or refused; Refusal the token a refused call's
	// text opens with (not-granted, …) or why the runtime refused it (unstaged, removed, denied).
	ToolStatus = attribute.Key("murmur.tool.status")
	Refusal    = attribute.Key("murmur.tool.refusal")
	// RPCSystem is rpc.system, the name of rpc.system.name before semantic conventions 1.39, kept beside
	// it for the backends that still read it.
	RPCSystem = attribute.Key("rpc.system")
)

// Murmur's attributes of the work inside one task: delegations, plans, hooks, WebAssembly modules,
// background commands and the questions a task asks its sender.
const (
	// DelegationID is a delegation's id (dlg_…): on the delegate-task call that started it and on the
	// sub-session's invoke_agent span; DelegationCapsule the sub-capsule's bare name, DelegationDepth
	// how deep the sub-session is (1 for a member's sub-capsule), DelegationStatus how it ended.
	DelegationID      = attribute.Key("murmur.delegation.id")
	DelegationCapsule = attribute.Key("murmur.delegation.capsule")
	DelegationDepth   = attribute.Key("murmur.delegation.depth")
	DelegationStatus  = attribute.Key("murmur.delegation.status")
	// PlanSteps is how many steps a plan has, PlanOnError its on_error; PlanStepsOK, PlanStepsError and
	// PlanStepsSkipped how many ended so.
	PlanSteps        = attribute.Key("murmur.plan.steps")
	PlanOnError      = attribute.Key("murmur.plan.on_error")
	PlanStepsOK      = attribute.Key("murmur.plan.steps.ok")
	PlanStepsError   = attribute.Key("murmur.plan.steps.error")
	PlanStepsSkipped = attribute.Key("murmur.plan.steps.skipped")
	// HookName is a hook's full name, HookEvent the event it ran at (on-tool-call, on-task-end),
	// HookOutcome what it decided (allow, deny, ask, failed; reopen, none), HookDenied whether its run
	// refused the tool call.
	HookName    = attribute.Key("murmur.hook.name")
	HookEvent   = attribute.Key("murmur.hook.event")
	HookOutcome = attribute.Key("murmur.hook.outcome")
	HookDenied  = attribute.Key("murmur.hook.denied")
	// WasmModule is the module a WebAssembly run ran (its tool's name), WasmDigest its digest;
	// WasmStatus the status of its result (ok, error), WasmExitCode its exit code, WasmStopped the limit
	// that stopped it (time, memory), WasmCold whether the run compiled it.
	WasmModule   = attribute.Key("murmur.wasm.module")
	WasmDigest   = attribute.Key("murmur.wasm.digest")
	WasmStatus   = attribute.Key("murmur.wasm.status")
	WasmExitCode = attribute.Key("murmur.wasm.exit_code")
	WasmStopped  = attribute.Key("murmur.wasm.stopped")
	WasmCold     = attribute.Key("murmur.wasm.cold")
	// HostCallFunction is the host function a module called (manage_pull, run_inference), HostCallRefusal
	// the token its refusal opens with, HostCallAnswerBytes how long its answer was.
	HostCallFunction    = attribute.Key("murmur.host_call.function")
	HostCallRefusal     = attribute.Key("murmur.host_call.refusal")
	HostCallAnswerBytes = attribute.Key("murmur.host_call.answer_bytes")
	// BackgroundWorkID is a background command's work id (wrk_…), BackgroundState how it ended (exited,
	// stopped); its name and exit code are the semantic conventions' process.command and process.exit.code.
	BackgroundWorkID = attribute.Key("murmur.background.work_id")
	BackgroundState  = attribute.Key("murmur.background.state")
	// InputKind is what a task asked its sender (question, approval), InputOutcome how it was answered
	// (answered, allow, deny, not_answered, canceled).
	InputKind    = attribute.Key("murmur.input.kind")
	InputOutcome = attribute.Key("murmur.input.outcome")
)

// The names of murmur's spans and span events of the work inside one task.
const (
	SpanPlan       = "murmur.plan"       // a submit-plan call's plan, over its steps' execute_tool spans
	SpanHook       = "murmur.hook"       // one run of a hook: "murmur.hook {event}"
	SpanWasm       = "murmur.wasm"       // one run of a WebAssembly module: "murmur.wasm {module}"
	SpanBackground = "murmur.background" // a command's life in the background: "murmur.background {command}"

	EventHostCall        = "murmur.host_call"        // a module's call of a host function, on its murmur.wasm span
	EventDelegationEnded = "murmur.delegation.ended" // a delegation's end, on the delegating task's span
	EventInputAsked      = "murmur.input.asked"      // a question to the task's sender, on the task's span
	EventInputAnswered   = "murmur.input.answered"   // its answer, or why none came
)

// The semantic conventions' attribute names murmur uses, from semconv v1.41.0.
const (
	RPCMethod          = semconv.RPCMethodKey
	RPCMethodOriginal  = semconv.RPCMethodOriginalKey
	RPCResponseStatus  = semconv.RPCResponseStatusCodeKey
	ErrorType          = semconv.ErrorTypeKey
	ServerAddress      = semconv.ServerAddressKey
	ServerPort         = semconv.ServerPortKey
	OperationName      = semconv.GenAIOperationNameKey
	AgentName          = semconv.GenAIAgentNameKey
	ConversationID     = semconv.GenAIConversationIDKey
	ProviderName       = semconv.GenAIProviderNameKey
	RequestModel       = semconv.GenAIRequestModelKey
	InputTokens        = semconv.GenAIUsageInputTokensKey
	OutputTokens       = semconv.GenAIUsageOutputTokensKey
	CacheReadTokens    = semconv.GenAIUsageCacheReadInputTokensKey
	CacheCreatedTokens = semconv.GenAIUsageCacheCreationInputTokensKey
	ToolName           = semconv.GenAIToolNameKey
	ToolCallID         = semconv.GenAIToolCallIDKey
	ProcessCommand     = semconv.ProcessCommandKey
	ProcessExitCode    = semconv.ProcessExitCodeKey
)

// The semantic conventions' values murmur uses, from semconv v1.41.0: rpc.system.name and
// gen_ai.operation.name.
var (
	RPCSystemJSONRPC = semconv.RPCSystemNameJSONRPC
	OpInvokeAgent    = semconv.GenAIOperationNameInvokeAgent
	OpChat           = semconv.GenAIOperationNameChat
	OpExecuteTool    = semconv.GenAIOperationNameExecuteTool
)
