#!/usr/bin/env python3
"""Random XState v5 machine module generator (actions & actors focus).

    gen.py SEED OUTDIR   -> writes OUTDIR/m.mjs and OUTDIR/m.case.json
"""
import json
import os
import random
import sys


# What a snapshot event records: the fields of the child's snapshot that
# every kind of actor has, as the trace shows them.
SNAP = ("({ s: event.snapshot.status, i: event.snapshot.input ?? null, "
        "o: event.snapshot.output ?? null, c: event.snapshot.context ?? null })")


def q(s):
    return json.dumps(s)


class Gen:
    def __init__(self, seed, child=False):
        self.r = random.Random(seed)
        r = self.r
        self.seed = seed
        self.child = child
        self.mid = 'child' if child else 'm'
        self.ext = ['A', 'B', 'C', 'D', 'E', 'F'][: r.randint(3, 6)]
        if child:
            self.ext = ['PING', 'FIN', 'INC']
        self.lbl = 0
        # feature flags
        self.f = {k: r.random() < p for k, p in dict(
            promise=0.45, callback=0.4, trans=0.3, childm=0.75, spawn=0.4,
            system=0.35, enqueue=0.5, delayraise=0.4, named=0.6, hist=0.25,
            parallel=0.4, always=0.35, after=0.45, throwy=0.12, input=0.4,
            output=0.3, emit=0.5, ctxspawn=0.0, forward=0.25,
            reenter=0.2, selfsend=0.1, snapshotev=0.15, ctxref=0.2, sdcancel=0.2,
        ).items()}
        if child:
            for k in ('childm', 'system', 'ctxspawn', 'input', 'snapshotev', 'spawn', 'ctxref', 'promise', 'trans'):
                self.f[k] = False
            self.f['callback'] = r.random() < 0.3
            self.f['output'] = True
        self.child_ids = []      # ids that might be children of root
        self.sys_ids = []
        self.delay_ids = []
        self.used_iids = []

    def label(self, p='a'):
        self.lbl += 1
        return f'{p}{self.lbl}'

    # ---------- expressions ----------
    def num(self):
        return self.r.randint(-2, 6)

    def guard(self, depth=0, state_paths=None):
        r = self.r
        opts = ['ctx', 'ctx', 'ev', 'named', 'named2', 'logic', 'statein', 'throw', 'len']
        k = r.choice(opts)
        if k == 'ctx':
            op = r.choice(['>', '<', '>=', '===', '!=='])
            return f"({{ context }}) => context.n {op} {r.randint(0, 6)}"
        if k == 'len':
            return f"({{ context }}) => context.log.length {r.choice(['>', '<'])} {r.randint(1, 8)}"
        if k == 'ev':
            return f"({{ event }}) => (event.v ?? 0) {r.choice(['>', '<', '==='])} {r.randint(0, 5)}"
        if k == 'named' and self.f['named']:
            return f"{{ type: 'gt', params: {{ k: {r.randint(0, 6)} }} }}"
        if k == 'named2' and self.f['named']:
            return r.choice(["'even'", f"{{ type: 'evGt', params: ({{ context }}) => ({{ k: context.n % 4 }}) }}", "'even'"])
        if k == 'logic' and depth < 2:
            fn = r.choice(['and', 'or', 'not'])
            if fn == 'not':
                return f"not({self.guard(depth + 1, state_paths)})"
            return f"{fn}([{self.guard(depth + 1, state_paths)}, {self.guard(depth + 1, state_paths)}])"
        if k == 'statein' and state_paths:
            p = r.choice(state_paths)
            return f"stateIn('#{self.mid}.{p}')"
        if k == 'throw' and self.f['throwy'] and depth == 0 and r.random() < 0.3:
            return "() => { throw new Error('guard boom') }" if not self.f['named'] else "'throwy'"
        return f"({{ context }}) => context.n % {r.randint(2, 3)} === 0"

    def logact(self, tag=None):
        tag = tag or self.label()
        return f"assign({{ log: ({{ context }}) => [...context.log, {q(tag)}] }})"

    def action(self, where, depth=0):
        """where: 'trans' | 'entry' | 'exit' | 'child' ; returns JS expression."""
        r = self.r
        kinds = ['log', 'log', 'assignN', 'assignFn', 'assignStatic', 'inline']
        if where != 'child':
            if where == 'trans':
                kinds += ['raise', 'raise']
            if self.f['emit']:
                kinds += ['emit', 'emitFn']
            if self.f['named']:
                kinds += ['namedAdd', 'namedNote', 'namedAddFn', 'namedEmit', 'namedRaise']
            if self.f['enqueue'] and depth == 0:
                kinds += ['enqueue', 'enqueue']
            if self.f['delayraise']:
                kinds += ['draise', 'draise', 'cancel']
            if self.child_ids and where == 'trans':
                kinds += ['sendTo', 'sendTo']
                if self.f['forward'] and where == 'trans':
                    kinds += ['forward']
            if self.f['spawn'] and where == 'trans':
                kinds += ['spawn', 'stop']
            if self.f['system'] and self.sys_ids and where == 'trans':
                kinds += ['sendSys']
            if self.f['throwy']:
                kinds += ['throw']
            if self.f['selfsend']:
                kinds += ['selfsend']
            kinds += ['logfn']
            if self.f['ctxref'] and where == 'trans':
                kinds += ['refspawn', 'refsend', 'refstop']
            if self.f['sdcancel']:
                kinds += ['cancelsd']
        if self.child and where != 'child':
            kinds += ['sp', 'sp', 'sp']
        k = r.choice(kinds)
        if k == 'sp':
            tag = self.label('s')
            if r.random() < 0.7:
                return f"sendParent(({{ context, event }}) => ({{ type: 'CH', v: context.n, tag: {q(tag)} + ':' + event.type }}))"
            return f"sendParent({{ type: 'CH', v: {r.randint(0, 9)}, tag: {q(tag)} }}, {{ delay: {r.choice([0, 50, 100])} }})"
        if k == 'log':
            return self.logact()
        if k == 'logfn':
            return f"log(({{ context }}) => 'n=' + context.n)"
        if k == 'assignN':
            sign = r.choice(['+', '-', '*'])
            return f"assign({{ n: ({{ context, event }}) => context.n {sign} (event.v ?? {r.randint(1, 3)}) }})"
        if k == 'assignFn':
            t = self.label()
            return f"assign(({{ context, event }}) => ({{ n: context.n + 1, log: [...context.log, {q(t)} + ':' + event.type] }}))"
        if k == 'assignStatic':
            return f"assign({{ n: {r.randint(0, 5)} }})"
        if k == 'inline':
            return "({ context }) => { void context.n; }"
        if k == 'raise':
            e = r.choice(['R1', 'R2'] + self.ext)
            if r.random() < 0.5:
                return f"raise({{ type: {q(e)} }})"
            return f"raise(({{ context }}) => ({{ type: {q(e)}, v: context.n }}))"
        if k == 'draise':
            e = r.choice(['R1', 'R2', 'T1'] + self.ext)
            d = r.choice(['0', '10', '50', '100', "'dyn'", '200'])
            idp = ''
            if r.random() < 0.6:
                i = r.choice(['d1', 'd2'])
                self.delay_ids.append(i)
                idp = f", id: {q(i)}"
            return f"raise({{ type: {q(e)}, v: {r.randint(0, 5)} }}, {{ delay: {d}{idp} }})"
        if k == 'cancel':
            return f"cancel({q(r.choice(['d1', 'd2']))})"
        if k == 'emit':
            return f"emit({{ type: {q('ev.' + self.label('e'))} }})"
        if k == 'emitFn':
            return f"emit(({{ context, event }}) => ({{ type: 'ev.fn', n: context.n, from: event.type }}))"
        if k == 'namedAdd':
            return f"{{ type: 'addN', params: {{ k: {r.randint(-2, 4)} }} }}"
        if k == 'namedAddFn':
            return "{ type: 'addN', params: ({ context, event }) => ({ k: (event.v ?? 1) + (context.n > 3 ? -1 : 1) }) }"
        if k == 'namedNote':
            return f"{{ type: 'note', params: {{ msg: {q(self.label('p'))} }} }}"
        if k == 'namedEmit':
            return f"{{ type: 'emitIt', params: {{ k: {r.randint(0, 9)} }} }}"
        if k == 'namedRaise':
            return "'raiseR'"
        if k == 'throw':
            if r.random() < 0.5:
                return "() => { throw new Error('action boom') }"
            return "'boom' " if self.f['named'] else "() => { throw new Error('action boom2') }"
        if k == 'sendTo':
            cid = r.choice(self.child_ids)
            ev = r.choice(['PING', 'PING', 'FIN', 'INC'])
            if r.random() < 0.5:
                ex = f"{{ type: {q(ev)}, v: {r.randint(0, 5)} }}"
            else:
                ex = f"({{ context }}) => ({{ type: {q(ev)}, v: context.n }})"
            opt = ''
            if r.random() < 0.2:
                opt = f", {{ delay: {r.choice([0, 20, 100])}, id: 'sd' }}"
            return f"sendTo({q(cid)}, {ex}{opt})"
        if k == 'forward':
            return f"forwardTo({q(r.choice(self.child_ids))})"
        if k == 'sendSys':
            sid = r.choice(self.sys_ids)
            return f"sendTo(({{ system }}) => system.get({q(sid)}), {{ type: 'PING', v: 7 }})"
        if k == 'selfsend':
            return f"sendTo(({{ self }}) => self, {{ type: {q(r.choice(['R2', 'T1']))} }})"
        if k == 'spawn':
            return self.spawn_expr()
        if k == 'stop':
            if self.child_ids and r.random() < 0.8:
                return f"stopChild({q(r.choice(self.child_ids))})"
            return "stopChild('nope')"
        if k == 'enqueue':
            return self.enqueue()
        if k == 'refspawn':
            src = 'childM' if self.f['childm'] else ('cb' if self.f['callback'] else 'acc' if self.f['trans'] else None)
            if src is None:
                self.f['callback'] = True
                src = 'cb'
            rid = r.choice(['r1', 'r2'])
            return f"assign({{ ref: ({{ spawn, context }}) => spawn({q(src)}, {{ id: {q(rid)}, input: {{ v: context.n }} }}) }})"
        if k == 'refsend':
            ev = r.choice(['PING', 'INC', 'FIN'])
            return f"sendTo(({{ context }}) => context.ref, ({{ event }}) => ({{ type: {q(ev)}, v: event.v ?? 1 }}))"
        if k == 'refstop':
            return "stopChild(({ context }) => context.ref)"
        if k == 'cancelsd':
            return "cancel('sd')"
        return self.logact()

    def spawn_expr(self):
        r = self.r
        srcs = []
        if self.f['childm']:
            srcs.append('childM')
        if self.f['callback']:
            srcs.append('cb')
        if self.f['trans']:
            srcs.append('acc')
        if self.f['promise']:
            srcs.append('prom')
        if not srcs:
            srcs = ['cb']
            self.f['callback'] = True
        src = r.choice(srcs)
        cid = r.choice(['s1', 's2'])
        if cid not in self.child_ids:
            self.child_ids.append(cid)
        opts = [f"id: {q(cid)}"]
        if self.f['system'] and r.random() < 0.6:
            sid = 'sys_' + cid
            opts.append(f"systemId: {q(sid)}")
            if sid not in self.sys_ids:
                self.sys_ids.append(sid)
        if r.random() < 0.6:
            opts.append(r.choice([f"input: {{ v: {r.randint(0, 5)} }}", "input: ({ context }) => ({ v: context.n })"]))
        if self.f['snapshotev'] and r.random() < 0.5:
            opts.append('syncSnapshot: true')
        return f"spawnChild({q(src)}, {{ {', '.join(opts)} }})"

    def enqueue(self):
        r = self.r
        lines = []
        for _ in range(r.randint(1, 4)):
            k = r.choice(['assign', 'raise', 'emit', 'check', 'action', 'send', 'spawn', 'cancel', 'draise', 'stop'])
            if k == 'assign':
                lines.append(f"enqueue.assign({{ n: ({{ context }}) => context.n + {r.randint(1, 3)} }});")
            elif k == 'raise':
                lines.append(f"enqueue.raise({{ type: {q(r.choice(['R1', 'R2']))} }});")
            elif k == 'draise':
                lines.append(f"enqueue.raise({{ type: {q(r.choice(['R1', 'T1']))} }}, {{ delay: {r.choice([10, 50, 100])}, id: 'd1' }});")
            elif k == 'emit':
                lines.append(f"enqueue.emit({{ type: 'ev.enq', n: context.n }});")
            elif k == 'check':
                g = r.choice(["'even'", "{ type: 'gt', params: { k: 2 } }", "({ context }) => context.n > 1"]) if self.f['named'] else "({ context }) => context.n > 1"
                lines.append(f"if (check({g})) {{ enqueue({self.logact()}); }} else {{ enqueue.assign({{ n: 0 }}); }}")
            elif k == 'action':
                lines.append(f"enqueue({self.action('trans', depth=1)});")
            elif k == 'send' and self.child_ids:
                lines.append(f"enqueue.sendTo({q(r.choice(self.child_ids))}, {{ type: 'PING', v: context.n }});")
            elif k == 'spawn' and self.f['spawn']:
                s = self.spawn_expr()
                lines.append(f"enqueue.{s};")
            elif k == 'cancel':
                lines.append("enqueue.cancel('d1');")
            elif k == 'stop' and self.child_ids:
                lines.append(f"enqueue.stopChild({q(r.choice(self.child_ids))});")
            else:
                lines.append(f"enqueue({self.logact()});")
        body = ' '.join(lines)
        return f"enqueueActions(({{ context, event, enqueue, check }}) => {{ {body} }})"

    def actions(self, where, lo=0, hi=3):
        n = self.r.randint(lo, hi)
        acts = [self.action(where) for _ in range(n)]
        if not acts:
            return None
        if len(acts) == 1 and self.r.random() < 0.5:
            return acts[0]
        return '[' + ', '.join(acts) + ']'

    # ---------- structure ----------
    def build_tree(self, path, depth):
        r = self.r
        node = {'path': path, 'children': {}, 'type': 'atomic'}
        if depth < 3 and r.random() < (0.55 if depth == 0 else 0.35):
            node['type'] = 'parallel' if (self.f['parallel'] and r.random() < 0.3 and depth > 0) else 'compound'
            n = r.randint(2, 3)
            for i in range(n):
                name = f"{'abcdefg'[depth]}{i}" if depth < 6 else f"s{i}"
                cp = (path + '.' + name) if path else name
                node['children'][name] = self.build_tree(cp, depth + 1)
            if node['type'] == 'compound':
                if self.f['hist'] and r.random() < 0.4 and path:
                    node['children']['hist'] = {'path': path + '.hist', 'children': {}, 'type': 'history',
                                                'deep': r.random() < 0.5}
                if r.random() < 0.3:
                    fname = 'fin'
                    node['children'][fname] = {'path': (path + '.' + fname) if path else fname, 'children': {}, 'type': 'final'}
        return node

    def all_nodes(self, node, out):
        out.append(node)
        for c in node['children'].values():
            self.all_nodes(c, out)
        return out

    def trans(self, node, targets, where_ev=None):
        r = self.r
        t = {}
        if r.random() < 0.65 and targets:
            tgt = r.choice(targets)
            t['target'] = f"'#{self.mid}.{tgt}'"
            if self.f['reenter'] and r.random() < 0.3:
                t['reenter'] = 'true'
        if r.random() < 0.4:
            t['guard'] = self.guard(state_paths=self.state_paths)
        a = self.actions('trans', 0, 3)
        if a:
            t['actions'] = a
        if not t:
            t['actions'] = self.logact()
        return '{ ' + ', '.join(f'{k}: {v}' for k, v in t.items()) + ' }'

    def trans_list(self, node, targets):
        if self.r.random() < 0.25:
            return '[' + ', '.join(self.trans(node, targets) for _ in range(2)) + ']'
        return self.trans(node, targets)

    def render(self, node, indent, targets):
        r = self.r
        pad = '  ' * indent
        parts = []
        t = node['type']
        if t == 'history':
            parts.append("type: 'history'")
            parts.append(f"history: {q('deep' if node['deep'] else 'shallow')}")
            return '{ ' + ', '.join(parts) + ' }'
        if t == 'final':
            parts.append("type: 'final'")
            if r.random() < 0.4:
                parts.append(f"entry: {self.logact()}")
            if r.random() < 0.4:
                parts.append(r.choice(["output: ({ context }) => ({ fin: context.n })", "output: { fixed: 1 }", "output: ({ event }) => ({ ev: event.type })"]))
            return '{ ' + ', '.join(parts) + ' }'
        if t == 'parallel':
            parts.append("type: 'parallel'")
            for cn, cc in node['children'].items():
                cc['oip'] = node.get('oip', False)
        if t == 'compound':
            # initial: first non-history, non-final child mostly
            names = [n for n, c in node['children'].items() if c['type'] not in ('history', 'final')]
            init = r.choice(names) if r.random() < 0.2 else names[0]
            parts.append(f"initial: {q(init)}")
            for cn, cc in node['children'].items():
                cc['oip'] = node.get('oip', False) and cn == init
        if r.random() < 0.2:
            parts.append(f"tags: {q([r.choice(['busy', 'x', 'y'])])}")
        e = self.actions('entry' if node['path'] else 'child', 0, 2) if r.random() < 0.6 else None
        if e:
            parts.append(f"entry: {e}")
        x = self.actions('exit' if node['path'] else 'child', 0, 2) if r.random() < 0.35 else None
        if x:
            parts.append(f"exit: {x}")
        # invoke
        inv = self.invoke(node) if (node['path'] and not node.get('oip') and r.random() < 0.35) else None
        if inv:
            parts.append(f"invoke: {inv}")
        # on
        on = {}
        n_on = r.randint(0, 3) if node['path'] else r.randint(0, 2)
        for _ in range(n_on):
            ev = r.choice(self.ext + ['R1', 'R2', 'T1'])
            on[ev] = self.trans_list(node, targets)
        if not node['path']:
            for ev, h in self.root_handlers.items():
                on[ev] = h
        if on:
            parts.append('on: { ' + ', '.join(f'{q(k)}: {v}' for k, v in on.items()) + ' }')
        if self.f['after'] and node['path'] and r.random() < 0.3:
            d = r.choice(['100', '50', '300', "'dyn'", '1000'])
            if d.startswith("'"):
                parts.append(f"after: {{ dyn: {self.trans(node, targets)} }}")
            else:
                parts.append(f"after: {{ {d}: {self.trans(node, targets)} }}")
        if self.f['always'] and node['path'] and r.random() < 0.2:
            # guarded self-resetting eventless transition
            g = f"({{ context }}) => context.n > {r.randint(3, 8)}"
            tgt = ''
            if r.random() < 0.4 and targets:
                tgt = f", target: '#{self.mid}.{r.choice(targets)}'"
            parts.append(f"always: {{ guard: {g}{tgt}, actions: [assign({{ n: 0 }}), {self.logact('alw')}] }}")
        if t in ('compound', 'parallel') and node['path'] and r.random() < 0.3:
            parts.append("onDone: " + self.trans_with_out(node, targets, "event.output ?? 'noout'"))
        if node['children']:
            inner = []
            for name, c in node['children'].items():
                inner.append(f"{pad}  {name}: {self.render(c, indent + 1, targets)}")
            parts.append('states: {\n' + ',\n'.join(inner) + f'\n{pad}}}')
        return '{\n' + ''.join(f'{pad}  {p},\n' for p in parts) + f'{pad}}}'

    def invoke(self, node):
        r = self.r
        srcs = []
        if self.f['promise']:
            srcs.append('prom')
        if self.f['callback']:
            srcs.append('cb')
        if self.f['trans']:
            srcs.append('acc')
        if self.f['childm']:
            srcs.append('childM')
        if not srcs:
            return None
        src = r.choice(srcs)
        free = [i for i in ['i1', 'i2', 'i3', 'i4'] if i not in self.used_iids]
        if not free:
            return None
        iid = free[0] if r.random() < 0.7 else r.choice(free)
        self.used_iids.append(iid)
        if iid not in self.child_ids:
            self.child_ids.append(iid)
        p = [f"id: {q(iid)}", f"src: {q(src)}"]
        if False:
            sid = 'sys_' + iid
            p.append(f"systemId: {q(sid)}")
            if sid not in self.sys_ids:
                self.sys_ids.append(sid)
        if r.random() < 0.8:
            p.append(r.choice([f"input: {{ v: {r.randint(0, 6)} }}", "input: ({ context, event }) => ({ v: context.n + (event.v ?? 0) })"]))
        targets = self.targets
        if src in ('prom', 'childM'):
            p.append(f"onDone: {self.trans(node, targets)}".replace('{ ', "{ actions: [assign({ out: ({ event }) => event.output ?? 'none' }), " + self.logact('done') + "], " if False else '{ ', 1))
            # always record output
            p[-1] = "onDone: " + self.trans_with_out(node, targets, 'event.output ?? null')
            if r.random() < 0.8:
                p.append("onError: " + self.trans_with_out(node, targets, "'err:' + (event.error?.message ?? String(event.error))"))
        if src == 'acc' or (src == 'childM' and r.random() < 0.3) or (self.f['snapshotev'] and r.random() < 0.4):
            p.append("onSnapshot: { actions: assign({ snap: ({ event }) => " + SNAP + " }) }")
        return '{ ' + ', '.join(p) + ' }'

    def trans_with_out(self, node, targets, expr):
        r = self.r
        t = {}
        if r.random() < 0.6 and targets:
            t['target'] = f"'#{self.mid}.{r.choice(targets)}'"
        if r.random() < 0.2:
            t['guard'] = self.guard(state_paths=self.state_paths)
        acts = [f"assign({{ out: ({{ event }}) => {expr} }})"]
        if r.random() < 0.6:
            acts.append(self.action('trans'))
        t['actions'] = '[' + ', '.join(acts) + ']'
        return '{ ' + ', '.join(f'{k}: {v}' for k, v in t.items()) + ' }'

    def child_machine(self):
        r = self.r
        after = r.choice(['100', '50', '200', '1000'])
        fin_after = r.random() < 0.5
        ctx = "({ input }) => ({ k: input?.v ?? 0, got: 0 })"
        reply = "sendParent(({ context, event }) => ({ type: 'CH', v: context.k + (event.v ?? 0) }))"
        c0_on = [f"PING: {{ actions: [assign({{ got: ({{ context }}) => context.got + 1 }}), {reply}] }}",
                 "FIN: 'done'"]
        if r.random() < 0.4:
            c0_on.append("INC: { actions: assign({ k: ({ context, event }) => context.k + (event.v ?? 1) }) }")
        if r.random() < 0.3:
            c0_on.append("PING2: { actions: sendParent({ type: 'CH2' }) }")
        entry0 = reply if r.random() < 0.4 else "assign({ got: 0 })"
        c1 = "{ entry: sendParent({ type: 'CH', v: 100 }), on: { PING: 'done', FIN: 'done' }" + (f", after: {{ {after}: 'done' }}" if fin_after else '') + " }"
        if self.f['system'] and r.random() < 0.3:
            c1 = "{ entry: sendTo(({ system }) => system.get('sys_root') ?? system.get('sys_i1'), { type: 'CH', v: 55 }), on: { PING: 'done', FIN: 'done' } }"
        err_state = ''
        if self.f['throwy'] and r.random() < 0.3:
            c0_on.append("BAD: { actions: () => { throw new Error('child boom') } }")
        return f"""createMachine({{
  id: 'child',
  context: {ctx},
  initial: 'c0',
  states: {{
    c0: {{ entry: {entry0}, on: {{ {', '.join(c0_on)} }}, after: {{ {after}: 'c1' }} }},
    c1: {c1},
    done: {{ type: 'final' }},
  }},
  output: ({{ context }}) => ({{ k: context.k, got: context.got }}),
}})"""

    def generate(self):
        r = self.r
        expr = self.machine_expr()
        mod = f"""import {{ setup, createMachine, assign, raise, emit, sendTo, sendParent, forwardTo, cancel, enqueueActions, spawnChild, stopChild, and, or, not, stateIn, fromPromise, fromCallback, fromTransition, log }} from 'xstate';

export default {expr};
"""
        return self.steps_case(mod)

    def machine_expr(self):
        r = self.r
        root = self.build_tree('', 1 if self.child else 0)
        if not root['children']:
            root['type'] = 'compound'
            root['children'] = {'a0': {'path': 'a0', 'children': {}, 'type': 'atomic'},
                                'a1': {'path': 'a1', 'children': {}, 'type': 'atomic'}}
        nodes = self.all_nodes(root, [])
        self.targets = [n['path'] for n in nodes if n['path']]
        self.state_paths = [n['path'] for n in nodes if n['path'] and n['type'] != 'history']
        # pre-register invoked child ids so sendTo has something
        if self.f['promise'] or self.f['callback'] or self.f['trans'] or self.f['childm']:
            self.child_ids.append('i1')
        if self.f['spawn']:
            self.child_ids.append('s1')
        # root handlers for child replies
        self.root_handlers = {}
        if self.f['childm'] or self.f['callback']:
            self.root_handlers['CH'] = "{ actions: assign({ n: ({ context, event }) => context.n + (event.v ?? 0), log: ({ context, event }) => [...context.log, 'ch' + event.v + (event.tag ? '/' + event.tag : '')] }) }"
            self.root_handlers['CB'] = "{ actions: assign({ log: ({ context, event }) => [...context.log, 'cb' + event.v] }) }"
        if self.f['snapshotev']:
            self.root_handlers['xstate.snapshot.s1'] = "{ actions: assign({ snaps: ({ context }) => (context.snaps ?? 0) + 1, snap: ({ event }) => " + SNAP + " }) }"
        root['oip'] = True
        body = self.render(root, 1, self.targets)
        # context
        if self.child:
            ctx = "({ input }) => ({ n: input?.v ?? 0, log: [], out: null, snap: null })"
        elif self.f['input']:
            ctx = "({ input }) => ({ n: input?.start ?? 0, log: [], out: null, snap: null })"
            if self.f['ctxspawn'] and (self.f['childm'] or self.f['callback']):
                src = 'childM' if self.f['childm'] else 'cb'
                ctx = f"({{ input, spawn }}) => ({{ n: input?.start ?? 0, log: [], out: null, snap: null, ref: spawn({q(src)}, {{ id: 'cref' }}) }})"
                self.child_ids.append('cref')
        else:
            ctx = "{ n: 0, log: [], out: null, snap: null }"
        # setup
        actors = []
        if self.f['promise']:
            actors.append("prom: fromPromise(async ({ input }) => { const v = input?.v ?? 0; if (v % 3 === 2) throw new Error('rej ' + v); return { v: v * 2 }; })")
        if self.f['callback']:
            actors.append("cb: fromCallback(({ sendBack, receive, input }) => { sendBack({ type: 'CB', v: input?.v ?? 0 }); receive((e) => { if (e.type === 'PING') sendBack({ type: 'CB', v: (e.v ?? 0) + 100 }); else if (e.type === 'FIN') sendBack({ type: 'CH', v: 1000 }); }); return () => {}; })")
        if self.f['trans']:
            actors.append("acc: fromTransition((s, e) => (e.type === 'INC' || e.type === 'PING') ? { c: s.c + (e.v ?? 1) } : s, ({ input }) => ({ c: input?.v ?? 0 }))")
        if self.f['childm']:
            if r.random() < 0.7:
                sub = Gen(self.seed * 7 + 1, child=True)
                actors.append(f"childM: {sub.machine_expr()}")
            else:
                actors.append(f"childM: {self.child_machine()}")
        acts = []
        if self.f['named']:
            acts = [
                "addN: assign({ n: ({ context }, params) => context.n + params.k })",
                "note: assign({ log: ({ context }, params) => [...context.log, params.msg] })",
                "boom: () => { throw new Error('named boom') }",
                "emitIt: emit(({ context }, params) => ({ type: 'named', k: params.k, n: context.n }))",
                "raiseR: raise({ type: 'R1' })",
            ]
        guards = []
        if self.f['named']:
            guards = [
                "gt: ({ context }, params) => context.n > params.k",
                "evGt: ({ event }, params) => (event.v ?? 0) > params.k",
                "even: ({ context }) => context.n % 2 === 0",
                "throwy: () => { throw new Error('named guard boom') }",
            ]
        delays = ["dyn: ({ context }) => 20 + Math.abs(context.n % 5) * 30"]
        setup = []
        if actors:
            setup.append('actors: {\n    ' + ',\n    '.join(actors) + '\n  }')
        if acts:
            setup.append('actions: {\n    ' + ',\n    '.join(acts) + '\n  }')
        if guards:
            setup.append('guards: {\n    ' + ',\n    '.join(guards) + '\n  }')
        setup.append('delays: { ' + ', '.join(delays) + ' }')
        out = ''
        if self.f['output']:
            out = "  output: ({ context }) => ({ n: context.n, len: context.log.length }),\n"
        return f"""setup({{
  {(','+chr(10)+'  ').join(setup)}
}}).createMachine({{
  id: {q(self.mid)},
  context: {ctx},
{out}  ...{body}
}})"""

    def steps_case(self, mod):
        r = self.r
        # steps
        steps = []
        evs = self.ext + ['R1', 'R2', 'T1']
        if self.f['childm'] or self.f['callback']:
            evs += ['CH']
        for _ in range(r.randint(5, 15)):
            if r.random() < 0.25:
                steps.append({'advance': r.choice([10, 50, 100, 150, 300, 1000])})
            else:
                e = {'type': r.choice(evs)}
                if r.random() < 0.7:
                    e['v'] = r.randint(0, 5)
                steps.append({'send': e})
        case = {'description': f'fuzz seed {self.seed}', 'machine': 'm.mjs', 'steps': steps}
        if self.f['input'] and r.random() < 0.8:
            case['input'] = {'start': r.randint(0, 5)}
        return mod, case


def main():
    seed = int(sys.argv[1])
    outdir = sys.argv[2]
    os.makedirs(outdir, exist_ok=True)
    mod, case = Gen(seed).generate()
    with open(os.path.join(outdir, 'm.mjs'), 'w') as f:
        f.write(mod)
    with open(os.path.join(outdir, 'm.case.json'), 'w') as f:
        json.dump(case, f, indent=1)


if __name__ == '__main__':
    main()
