package a2a

// AgentCard describes a door: who answers there, how to call it, and what it can do.
type AgentCard struct {
	Name                 string                    `json:"name"`
	Description          string                    `json:"description"`
	Version              string                    `json:"version"`
	SupportedInterfaces  []AgentInterface          `json:"supportedInterfaces"`
	Capabilities         AgentCapabilities         `json:"capabilities"`
	DefaultInputModes    []string                  `json:"defaultInputModes"`
	DefaultOutputModes   []string                  `json:"defaultOutputModes"`
	Skills               []AgentSkill              `json:"skills"`
	SecuritySchemes      map[string]SecurityScheme `json:"securitySchemes,omitempty"`
	SecurityRequirements []SecurityRequirement     `json:"securityRequirements,omitempty"`
	Provider             *AgentProvider            `json:"provider,omitempty"`
}

// AgentInterface is one way to reach a door.
type AgentInterface struct {
	URL             string `json:"url"`
	ProtocolBinding string `json:"protocolBinding"`
	ProtocolVersion string `json:"protocolVersion"`
}

// BindingJSONRPC is the protocol binding of a JSON-RPC interface.
const BindingJSONRPC = "JSONRPC"

// AgentCapabilities are the optional features a door declares.
type AgentCapabilities struct {
	Streaming         bool `json:"streaming"`
	PushNotifications bool `json:"pushNotifications"`
	ExtendedAgentCard bool `json:"extendedAgentCard"`
}

// AgentSkill is one thing the agent is good at.
type AgentSkill struct {
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Tags        []string `json:"tags"`
}

// AgentProvider names who runs the agent.
type AgentProvider struct {
	Organization string `json:"organization"`
	URL          string `json:"url"`
}

// SecurityScheme is one authentication scheme of the card; murmur uses only HTTP bearer.
type SecurityScheme struct {
	HTTPAuth *HTTPAuthSecurityScheme `json:"httpAuthSecurityScheme,omitempty"`
}

// HTTPAuthSecurityScheme is an HTTP authentication scheme such as Bearer.
type HTTPAuthSecurityScheme struct {
	Scheme string `json:"scheme"`
}

// SecurityRequirement lists the schemes (by name) a request must satisfy, each with its scopes. A door's
// card lists none: a2a-go v2.3.1 cannot read this ProtoJSON form (a2aproject/a2a-go#430), see
// server.NewCard.
type SecurityRequirement struct {
	Schemes map[string]StringList `json:"schemes"`
}

// StringList is a list of scopes.
type StringList struct {
	List []string `json:"list"`
}
