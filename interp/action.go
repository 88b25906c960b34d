package interp

// Action is something a transition, an entry or an exit does. The built-in
// actions (assign, raise, cancel, emit, log, ...) are resolved by the engine
// as XState resolves them; NamedAction is looked up in the machine's
// implementations; FuncAction runs user code.
type Action interface{ actionType() string }

// NamedAction names an action of the machine's implementations, with
// params. A name with no implementation is skipped, as in XState.
type NamedAction struct {
	Type   string
	Params *Expr
}

// FuncAction is a custom action: a function run for its side effects.
// Name is "" for an inline function. Its error puts the actor in status
// error.
type FuncAction struct {
	Name string
	Fn   func(a Args, params any) error
}

// AssignAction updates the context (XState's assign()). Fn returns the
// partial update, merged over the context as Object.assign does; Into,
// used instead when set, sets the updated properties in ctx, a copy of the
// context made for the new snapshot (a.Context is the context before).
type AssignAction struct {
	Fn   func(a Args, params any) (map[string]any, error)
	Into func(a Args, params any, ctx map[string]any) error
}

// RaiseAction puts an event on the internal queue, or schedules it when it
// has a delay (XState's raise()).
type RaiseAction struct {
	Event *Expr // evaluates to an Event or a map with "type"
	Delay *Expr // nil: no delay; a number of ms
	// DelayName names a delay of the implementations (takes precedence
	// over Delay). A named delay with no implementation raises at once.
	DelayName string
	ID        *Expr // the scheduled event's id, for cancel; nil: generated
}

// CancelAction cancels a delayed event by its id (XState's cancel()).
type CancelAction struct {
	ID *Expr
}

// EmitAction emits an event to the actor's listeners (XState's emit()).
type EmitAction struct {
	Event *Expr
}

// LogAction logs a value (XState's log()).
type LogAction struct {
	Value *Expr
	Label string
}

func (a *NamedAction) actionType() string  { return a.Type }
func (a *FuncAction) actionType() string   { return a.Name }
func (a *AssignAction) actionType() string { return "xstate.assign" }
func (a *RaiseAction) actionType() string  { return "xstate.raise" }
func (a *CancelAction) actionType() string { return "xstate.cancel" }
func (a *EmitAction) actionType() string   { return "xstate.emit" }
func (a *LogAction) actionType() string    { return "xstate.log" }

// ActionType returns the type XState gives an action: its name, or
// "xstate.assign" and the like for built-ins, "" for an inline function.
func ActionType(a Action) string { return a.actionType() }

// GuardType returns the type XState gives a guard: its name, or
// "xstate.and" and the like for built-ins, "" for an inline function.
func GuardType(g Guard) string { return g.guardType() }
