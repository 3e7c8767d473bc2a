// Package converse is what makes a member's tasks a conversation (DESIGN §15): the earlier tasks of a
// context as the start of a new task's conversation (History), a task that waits for its sender
// (Waiter: the question of TASK_STATE_INPUT_REQUIRED, the follow-up that answers it, the wait's bound),
// and answers beyond text (Collect: the files a task wrote under out/artifacts/ as file parts).
//
// It takes plain values and never imports package member; the session calls it.
package converse
