package interp

// This file holds the machine definition: what a parser (the xstate package)
// produces and what New compiles. Definitions are plain data plus the Go
// values of guards, actions and expressions.

// StateType is the kind of a state node.
type StateType uint8

// The kinds of state nodes, as XState names them.
const (
	Atomic StateType = iota
	Compound
	Parallel
	Final
	History
)

var stateTypeNames = [...]string{"atomic", "compound", "parallel", "final", "history"}

func (t StateType) String() string {
	if int(t) < len(stateTypeNames) {
		return stateTypeNames[t]
	}
	return "unknown"
}

// MachineDef is a whole machine before compilation.
type MachineDef struct {
	// Root is the root state node. Its ID is the machine's id ("(machine)"
	// when empty, as in XState).
	Root *StateDef
	// Context is the initial context: a static value, or a function of the
	// actor's input (Args.Input). Nil means no context (undefined).
	Context *Expr
	// Impl holds the named implementations the machine was created with
	// (setup() in XState); Machine.Provide merges more.
	Impl Implementations
	// Where, when set, says where the machine's source names an
	// implementation its state refers to (a file, "" for the machine's
	// own, and a line and column, 0 when unknown), for Unresolved to
	// report. The engine reads no source: the reader of a config gives it.
	Where func(kind, name, state string) (file string, line, col int)
}

// StateDef is one state node before compilation.
type StateDef struct {
	Key         string // the node's key in its parent's states; ignored for the root
	ID          string // the explicit id, "" for the default (machine id + path)
	Type        StateType
	Initial     string // the initial child's key, for compound nodes
	Deep        bool   // deep history (history nodes only)
	HistoryTo   []string
	States      []*StateDef // children in document order
	On          []EventDef  // event handlers in document order
	Always      []*TransitionDef
	After       []AfterDef
	OnDone      []*TransitionDef
	Entry, Exit []Action
	Invoke      []*InvokeDef
	Tags        []string
	Output      *Expr // final nodes and the root
	Meta        any
	Description string
}

// EventDef is the list of transitions for one event descriptor of an `on`.
type EventDef struct {
	Event       string
	Transitions []*TransitionDef
}

// AfterDef is one entry of an `after` map: a delay in milliseconds or a
// named delay, and its transitions.
type AfterDef struct {
	Ms          float64
	Name        string // a named delay; "" when Ms is the delay
	Transitions []*TransitionDef
}

// TransitionDef is one transition of an `on`, `always`, `after`, `onDone`
// or invoke handler.
type TransitionDef struct {
	Targets     []string // nil: targetless
	HasTarget   bool     // a target was given (even an empty list)
	Guard       Guard
	Actions     []Action
	Reenter     bool
	Description string
	Meta        any
}

// InvokeDef is one invoked actor of a state node.
type InvokeDef struct {
	ID         string // "" gives XState's generated id
	Src        string // a named actor in Implementations.Actors
	Logic      ActorLogic
	Input      *Expr
	SystemID   string
	OnDone     []*TransitionDef
	OnError    []*TransitionDef
	OnSnapshot []*TransitionDef
}
