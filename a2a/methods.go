package a2a

// Method is a JSON-RPC method name of A2A 1.0.
type Method string

// The methods of A2A 1.0.
const (
	MethodSendMessage          Method = "SendMessage"
	MethodSendStreamingMessage Method = "SendStreamingMessage"
	MethodGetTask              Method = "GetTask"
	MethodListTasks            Method = "ListTasks"
	MethodCancelTask           Method = "CancelTask"
	MethodSubscribeToTask      Method = "SubscribeToTask"
	MethodCreatePushConfig     Method = "CreateTaskPushNotificationConfig"
	MethodGetPushConfig        Method = "GetTaskPushNotificationConfig"
	MethodListPushConfigs      Method = "ListTaskPushNotificationConfigs"
	MethodDeletePushConfig     Method = "DeleteTaskPushNotificationConfig"
	MethodGetExtendedAgentCard Method = "GetExtendedAgentCard"
)

// legacyMethods are the A2A 0.3 names, which a 1.0 door refuses with ErrVersionNotSupported.
var legacyMethods = map[string]bool{
	"message/send":                        true,
	"message/stream":                      true,
	"tasks/get":                           true,
	"tasks/list":                          true,
	"tasks/cancel":                        true,
	"tasks/resubscribe":                   true,
	"tasks/pushNotificationConfig/set":    true,
	"tasks/pushNotificationConfig/get":    true,
	"tasks/pushNotificationConfig/list":   true,
	"tasks/pushNotificationConfig/delete": true,
	"agent/getAuthenticatedExtendedCard":  true,
	"agent/authenticatedExtendedCard":     true,
}

// IsLegacyMethod reports whether name is an A2A 0.3 method name.
func IsLegacyMethod(name string) bool { return legacyMethods[name] }

// Header names of the A2A HTTP bindings.
const (
	HeaderVersion = "A2A-Version"
)
