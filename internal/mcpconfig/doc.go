// Package mcpconfig is the MCP config file a harness reads to reach the session's tool server (the shape
// Claude Code's --mcp-config reads): server writes it and reads it back in its tests, and the fake harness
// reads it as an external harness would.
//
// Concurrency: pure functions only.
//
// Imports: the standard library only; it must not import any package of this module.
package mcpconfig
