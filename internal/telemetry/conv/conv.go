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
)

// The semantic conventions' values murmur uses, from semconv v1.41.0: rpc.system.name and
// gen_ai.operation.name.
var (
	RPCSystemJSONRPC = semconv.RPCSystemNameJSONRPC
	OpInvokeAgent    = semconv.GenAIOperationNameInvokeAgent
	OpChat           = semconv.GenAIOperationNameChat
	OpExecuteTool    = semconv.GenAIOperationNameExecuteTool
)
