// Package converse is what makes a member's tasks a conversation (DESIGN §15): the earlier tasks of a
// context as the start of a new task's conversation (History), a task that waits for its sender
// (Waiter: the question of TASK_STATE_INPUT_REQUIRED, the follow-up that answers it, the wait's bound),
// and answers beyond text (Collect: the files a task wrote under out/artifacts/ as file parts).
//
// The session's side of it (task.go) is Config, plain values and callbacks into the session core: the
// follow-up that names a task (FollowUp), the contextId check (CheckContext), a context's tasks
// (ContextTasks), the question asked of the sender (Ask, Approval, InputTimeout), data answers
// (AnswerData) and a task's files as artifacts (Artifacts, KeptFile).
//
// It takes plain values and never imports package member; the session calls it.
package converse
