// Package driver is inference: the Driver interface an agent's loop calls once a turn, the conversation
// it is given (ChatMessage, ToolCall, ToolResult, ToolSpec, and Fence, which marks content the model
// must treat as data), what it answers (InferResponse) and what the provider reported spending (Usage,
// which also says how the provider counts cache reads and writes); the drivers: openai and anthropic
// over their official SDKs, and script, the deterministic offline model that plays a script.yaml;
// credentials (env:, file:); and Build, which makes a driver for each choice a capsule declares.
//
// Builds: the openai and anthropic drivers (and the SDKs, most of a cold build of mur) are left out of
// a build made with -tags offline (OfflineTag), for a first build that takes a fraction of the time.
// Such a mur serves the script driver alone: ModelDrivers is false, and Build, CheckChoice and Serves
// refuse a model provider's driver with ErrLeftOut, naming the command that installs a mur serving
// every driver (FullBuild).
//
// Concurrency: a Driver is safe for concurrent use; each Infer call is independent and honours its
// context. Parsed scripts are read-only.
//
// Imports: capsule (a choice's settings) and internal/yamldoc; never member or another member/...
// package.
package driver
