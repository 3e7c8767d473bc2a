// Package control applies one change the operator asks for through the control surface (DESIGN §14):
// it checks the setting against control.agent_settings and the settings this member can change, makes
// the change through the small Driver interface Choice implements (the same checks switch-driver
// has), and writes control_change or control_refused. The agent loop writes control_applied when an
// inference call first uses the change.
//
// Choice is that setting's state: the driver choice the next inference call uses, the checked switch,
// and whether the next call is the first to use a switch (control_applied).
//
// Concurrency: Apply keeps no state; it is as safe for concurrent use as the Driver and Record it is
// given (the session's are). A Choice is safe for concurrent use.
//
// Imports: internal/ids, member/capsule, member/records (the record types) and runtimetools; never
// member.
package control
