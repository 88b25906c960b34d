#!/usr/bin/env python3
"""Random XState v5 JSON machine + impl + case generator.

usage: gen.py SEED OUTDIR
"""
import json, random, sys, os

IMPL = r"""import { assign, raise, emit, log, cancel, enqueueActions } from 'xstate';

const rec = (msg) => assign({ log: ({ context }) => [...context.log, msg] });

export default {
  guards: {
    nLt: ({ context }, params) => context.n < params.k,
    nGe: ({ context }, params) => context.n >= params.k,
    nEven: ({ context }) => context.n % 2 === 0,
    evGt: ({ event }, params) => (event.n ?? 0) > params.k,
    hasN: ({ event }) => event.n !== undefined,
    yes: () => true,
    no: () => false,
    logHas: ({ context }, params) => context.log.includes(params.msg),
  },
  actions: {
    rec: assign({ log: ({ context }, params) => [...context.log, params.msg] }),
    recEv: assign({ log: ({ context, event }) => [...context.log, 'ev:' + event.type + (event.output !== undefined ? '=' + JSON.stringify(event.output) : '') + (event.n !== undefined ? '#' + event.n : '')] }),
    inc: assign({ n: ({ context }) => context.n + 1 }),
    incBy: assign({ n: ({ context, event }) => context.n + (typeof event.n === 'number' ? event.n : 1) }),
    raiseA: enqueueActions(({ context, enqueue }) => { if (context.r < 3) { enqueue.assign({ r: context.r + 1 }); enqueue.raise({ type: 'A' }); } }),
    raiseB: enqueueActions(({ context, enqueue }) => { if (context.r < 3) { enqueue.assign({ r: context.r + 1 }); enqueue.raise({ type: 'B', n: context.r }); } }),
    raiseC: enqueueActions(({ context, enqueue }) => { if (context.r < 3) { enqueue.assign({ r: context.r + 1 }); enqueue.raise({ type: 'C' }); } }),
    raiseEv: enqueueActions(({ context, enqueue }) => { if (context.r < 3) { enqueue.assign({ r: context.r + 1 }); enqueue.raise({ type: 'ev.raised' }); } }),
    raiseLater: raise({ type: 'D', n: 7 }, { delay: 150, id: 'later' }),
    raiseLaterNamed: raise({ type: 'C' }, { delay: 'short', id: 'later2' }),
    cancelLater: cancel('later'),
    cancelLater2: cancel('later2'),
    emitE: emit({ type: 'E' }),
    emitN: emit(({ context }) => ({ type: 'N', n: context.n, log: context.log.length })),
    say: log('hello'),
    noop: () => {},
  },
  delays: {
    short: 100,
    ctx: ({ context }) => 200 + context.n * 50,
  },
};
"""

EVENTS = ['A', 'B', 'C', 'D']
EXTRA_EVENTS = ['ev.one', 'ev.two.x', 'Z']


class Node:
    def __init__(self, key, parent):
        self.key = key
        self.parent = parent
        self.kind = 'atomic'
        self.children = []
        self.id = None
        self.cfg = {}
        self.hist = None
        self.initial = None

    @property
    def path(self):
        p = []
        n = self
        while n.parent is not None:
            p.append(n.key)
            n = n.parent
        return list(reversed(p))

    def descendants(self):
        for c in self.children:
            yield c
            yield from c.descendants()

    def ancestors(self):
        n = self.parent
        while n is not None:
            yield n
            n = n.parent


class Gen:
    def __init__(self, seed):
        self.r = random.Random(seed)
        self.counter = 0
        self.nstates = 0
        self.idcount = 0
        self.all = []
        self.max_states = self.r.randint(5, 16)

    def name(self):
        self.counter += 1
        return 's%d' % self.counter

    def build(self, node, depth, maxdepth):
        r = self.r
        self.all.append(node)
        if node.parent is not None and r.random() < 0.2:
            self.idcount += 1
            node.id = 'id%d' % self.idcount
        if node.kind in ('compound', 'parallel'):
            if node.kind == 'parallel':
                n = r.randint(2, 3)
            else:
                n = r.randint(1, 4)
            for i in range(n):
                c = Node(self.name(), node)
                self.nstates += 1
                if depth + 1 < maxdepth and self.nstates < self.max_states and r.random() < 0.5:
                    c.kind = 'parallel' if r.random() < 0.3 else 'compound'
                else:
                    c.kind = 'atomic'
                    if node.kind == 'compound' and i > 0 and r.random() < 0.3:
                        c.kind = 'final'
                    elif node.kind == 'parallel' and r.random() < 0.05:
                        c.kind = 'final'
                node.children.append(c)
            # parallel regions: mostly compound
            if node.kind == 'parallel':
                for c in node.children:
                    if c.kind == 'atomic' and depth + 1 < maxdepth and r.random() < 0.7:
                        c.kind = 'compound'
            for c in node.children:
                self.build(c, depth + 1, maxdepth)
            # history
            if os.environ.get('NOHIST'):
                pass
            elif node.kind == 'parallel' and os.environ.get('NOPARHIST'):
                pass
            elif node.parent is not None and r.random() < 0.3 or (node.parent is None and r.random() < 0.1):
                h = Node(self.name(), node)
                h.kind = 'history'
                h.htype = r.choice(['shallow', 'deep'])
                h.htarget = None
                cands = [c for c in node.children if c.kind != 'history']
                if node.kind == 'compound' and r.random() < 0.4:
                    h.htarget = r.choice(cands).key
                node.children.append(h)
                self.all.append(h)
                if r.random() < 0.3 and node.kind == 'compound':
                    # put it earlier
                    node.children.remove(h)
                    node.children.insert(r.randint(0, len(node.children)), h)
            if node.kind == 'compound':
                nonhist = [c for c in node.children if c.kind not in ('history', 'final')] or [c for c in node.children if c.kind != 'history']
                if r.random() < 0.7:
                    node.initial = nonhist[0].key
                else:
                    node.initial = r.choice(nonhist).key

    # ---- targets ----
    def abs_ref(self, n):
        if n.parent is None:
            return '#m'
        return '#m.' + '.'.join(n.path)

    def ref_from(self, src, tgt):
        """A string target for transition in src to tgt, in some random valid form."""
        r = self.r
        forms = []
        forms.append(self.abs_ref(tgt))
        if tgt.id:
            forms.append('#' + tgt.id)
        # id of ancestor + path
        for a in tgt.ancestors():
            if a.id:
                rel = tgt.path[len(a.path):]
                forms.append('#' + a.id + '.' + '.'.join(rel))
        # sibling / dotted sibling path
        if src.parent is not None:
            p = src.parent
            if tgt in list(p.descendants()):
                rel = tgt.path[len(p.path):]
                forms.append('.'.join(rel))
                forms.append('.'.join(rel))
        # child relative
        if tgt in list(src.descendants()):
            rel = tgt.path[len(src.path):]
            forms.append('.' + '.'.join(rel))
            forms.append('.' + '.'.join(rel))
        return r.choice(forms)

    def random_target_node(self, src, safe=False):
        r = self.r
        cands = [n for n in self.all if n.parent is not None]
        if safe:
            cands = [n for n in cands if n.kind not in ('final', 'history')]
        # prefer near nodes
        near = []
        if src.parent is not None:
            near = [c for c in src.parent.children if c is not src]
        near += list(src.descendants())
        if safe:
            near = [n for n in near if n.kind not in ('final', 'history')]
        if near and r.random() < 0.6:
            return r.choice(near)
        if r.random() < 0.03:
            return self.root
        return r.choice(cands)

    def multi_target(self, src):
        r = self.r
        pars = [n for n in self.all if n.kind == 'parallel']
        if not pars:
            return None
        p = r.choice(pars)
        regions = [c for c in p.children if c.kind != 'history']
        k = r.randint(2, len(regions)) if len(regions) >= 2 else 1
        chosen = r.sample(regions, k)
        out = []
        for reg in chosen:
            ds = [reg] + [d for d in reg.descendants()]
            out.append(self.abs_ref(r.choice(ds)))
        return out

    def guard(self, allow_event=True):
        r = self.r
        ch = r.random()
        if ch < 0.3:
            return {'type': 'nLt', 'params': {'k': r.randint(1, 4)}}
        if ch < 0.4:
            return {'type': 'nGe', 'params': {'k': r.randint(1, 4)}}
        if ch < 0.5:
            return 'nEven'
        if ch < 0.65 and allow_event:
            return {'type': 'evGt', 'params': {'k': r.randint(0, 5)}}
        if ch < 0.72 and allow_event:
            return 'hasN'
        if ch < 0.8:
            return r.choice(['yes', 'no'])
        return {'type': 'logHas', 'params': {'msg': 'en:' + r.choice(self.all).key}}

    def action(self, where):
        r = self.r
        ch = r.random()
        if ch < 0.35:
            return {'type': 'rec', 'params': {'msg': where}}
        if ch < 0.5:
            return 'inc'
        if ch < 0.55:
            return 'incBy'
        if ch < 0.62:
            return 'recEv'
        if ch < 0.72:
            return r.choice(['raiseA', 'raiseB', 'raiseC', 'raiseEv'])
        if ch < 0.78:
            return r.choice(['raiseLater', 'raiseLaterNamed'])
        if ch < 0.82:
            return r.choice(['cancelLater', 'cancelLater2'])
        if ch < 0.9:
            return r.choice(['emitE', 'emitN'])
        if ch < 0.95:
            return 'say'
        return 'noop'

    def actions(self, where, maxn=3):
        r = self.r
        n = r.randint(0, maxn)
        acts = [self.action(where) for _ in range(n)]
        if not acts:
            return None
        if len(acts) == 1 and r.random() < 0.5:
            return acts[0]
        return acts

    def transition(self, src, label, eventless=False):
        r = self.r
        safe = label.endswith(':*') or label.endswith(':done') or label.endswith(':ev.*')
        t = {}
        ch = r.random()
        if eventless:
            # must be guarded by nLt with inc, or unguarded forward sibling
            sibs = [c for c in src.parent.children] if src.parent is not None else []
            later = []
            if src.parent is not None:
                idx = sibs.index(src)
                later = [c for c in sibs[idx + 1:] if c.kind not in ('history', 'final')]
            if later and r.random() < 0.4 and src.parent.kind == 'compound':
                tg = r.choice(later)
                t['target'] = tg.key
                if r.random() < 0.5:
                    t['guard'] = self.guard(allow_event=True)
                a = self.actions('t:' + label, 2)
                if a:
                    t['actions'] = a
                return t
            t['guard'] = {'type': 'nLt', 'params': {'k': r.randint(1, 5)}}
            acts = ['inc']
            a = self.actions('t:' + label, 2)
            if a:
                acts += a if isinstance(a, list) else [a]
            r.shuffle(acts)
            t['actions'] = acts
            if r.random() < 0.75:
                tg = self.random_target_node(src)
                t['target'] = self.ref_from(src, tg)
            if r.random() < 0.15:
                t['reenter'] = True
            return t
        if ch < 0.12 and not safe:
            mt = self.multi_target(src)
            if mt:
                t['target'] = mt
        elif ch < 0.8:
            tg = self.random_target_node(src, safe)
            if r.random() < 0.1 and src.kind != 'final':
                tg = src
            t['target'] = self.ref_from(src, tg)
        if r.random() < 0.35:
            t['guard'] = self.guard()
        a = self.actions('t:' + label)
        if a:
            t['actions'] = a
        if r.random() < 0.15:
            t['reenter'] = True
        if r.random() < 0.05:
            t['description'] = 'desc'
        if r.random() < 0.05:
            t['meta'] = {'x': 1}
        return t

    def transitions(self, src, label, eventless=False):
        r = self.r
        n = 1 if r.random() < 0.7 else r.randint(2, 3)
        ts = [self.transition(src, label, eventless) for _ in range(n)]
        if n == 1 and r.random() < 0.4 and not eventless:
            t = ts[0]
            if set(t.keys()) == {'target'} and isinstance(t['target'], str):
                return t['target']
            return t
        return ts

    def config(self, node):
        r = self.r
        c = {}
        if node.kind == 'history':
            c['type'] = 'history'
            if node.htype == 'deep' or r.random() < 0.5:
                c['history'] = node.htype
            if node.htarget:
                c['target'] = node.htarget
            return c
        if node.id:
            c['id'] = node.id
        if node.kind == 'parallel':
            c['type'] = 'parallel'
        if node.kind == 'final':
            c['type'] = 'final'
        if node.kind == 'compound':
            if node.initial is not None:
                c['initial'] = node.initial
        if r.random() < 0.7:
            acts = [{'type': 'rec', 'params': {'msg': 'en:' + node.key}}]
            if r.random() < 0.3:
                acts.append(self.action('en2:' + node.key))
            c['entry'] = acts if len(acts) > 1 or r.random() < 0.5 else acts[0]
        if r.random() < 0.6 and node.parent is not None:
            acts = [{'type': 'rec', 'params': {'msg': 'ex:' + node.key}}]
            if r.random() < 0.3:
                acts.append(self.action('ex2:' + node.key))
            c['exit'] = acts if len(acts) > 1 or r.random() < 0.5 else acts[0]
        if r.random() < 0.2:
            c['tags'] = r.sample(['t1', 't2', 't3'], r.randint(1, 2))
        if r.random() < 0.05:
            c['meta'] = {'k': node.key}
        if r.random() < 0.05:
            c['description'] = 'state ' + node.key
        if node.kind == 'final':
            if r.random() < 0.5:
                c['output'] = {'from': node.key, 'v': r.randint(0, 9)}
            return c
        # on
        on = {}
        pool = EVENTS + EXTRA_EVENTS[:2]
        nev = r.choice([0, 1, 1, 2, 2, 3])
        for ev in r.sample(pool, min(nev, len(pool))):
            on[ev] = self.transitions(node, node.key + ':' + ev)
        if r.random() < 0.07:
            on['*'] = self.transitions(node, node.key + ':*')
        if r.random() < 0.07:
            on['ev.*'] = self.transitions(node, node.key + ':ev.*')
        if r.random() < 0.05:
            on['E'] = {}  # empty transition
        if on:
            c['on'] = on
        if node.parent is not None and r.random() < 0.18:
            c['always'] = self.transitions(node, node.key + ':always', eventless=True)
        if node.parent is not None and r.random() < 0.18:
            after = {}
            for _ in range(r.randint(1, 2)):
                key = r.choice(['100', '250', '500', 'short', 'ctx', '1000'])
                after[key] = self.transitions(node, node.key + ':after' + key)
            c['after'] = after
        if node.kind in ('compound', 'parallel') and r.random() < 0.5:
            c['onDone'] = self.transitions(node, node.key + ':done')
        if os.environ.get('NOWILDFALLBACK') and ('*' in on or 'ev.*' in on):
            def strip(t):
                if isinstance(t, list):
                    return [strip(x) for x in t]
                if isinstance(t, dict):
                    t = dict(t); t.pop('guard', None)
                return t
            for k in list(on):
                if '*' not in k:
                    on[k] = strip(on[k])
            if 'after' in c:
                c['after'] = {k: strip(v) for k, v in c['after'].items()}
            if 'onDone' in c:
                c['onDone'] = strip(c['onDone'])
        if node.children:
            c['states'] = {ch.key: self.config(ch) for ch in node.children}
        return c

    def machine(self):
        r = self.r
        root = Node('m', None)
        self.root = root
        root.kind = 'parallel' if r.random() < 0.2 else 'compound'
        maxdepth = r.randint(1, 4)
        self.build(root, 0, maxdepth + 1)
        # make sure finals exist sometimes at top level
        cfg = {'id': 'm'}
        body = self.config(root)
        body.pop('exit', None)
        cfg.update(body)
        ctx = {'log': [], 'n': 0, 'r': 0}
        cfg = {'id': 'm', 'context': ctx, **{k: v for k, v in cfg.items() if k != 'id'}}
        if r.random() < 0.3:
            cfg['output'] = {'done': True}
        return cfg

    def steps(self):
        r = self.r
        n = r.randint(5, 15)
        out = []
        for _ in range(n):
            ch = r.random()
            if ch < 0.72:
                ev = {'type': r.choice(EVENTS)}
                if r.random() < 0.3:
                    ev['n'] = r.randint(0, 6)
                out.append({'send': ev})
            elif ch < 0.8:
                out.append({'send': {'type': r.choice(EXTRA_EVENTS)}})
            else:
                out.append({'advance': r.choice([50, 100, 150, 250, 500, 1000])})
        return out


def main():
    seed = int(sys.argv[1])
    outdir = sys.argv[2]
    os.makedirs(outdir, exist_ok=True)
    g = Gen(seed)
    m = g.machine()
    with open(os.path.join(outdir, 'm.json'), 'w') as f:
        json.dump(m, f, indent=1)
    with open(os.path.join(outdir, 'm.impl.mjs'), 'w') as f:
        f.write(IMPL)
    case = {'description': 'fuzz seed %d' % seed, 'machine': 'm.json',
            'implementations': 'm.impl.mjs', 'steps': g.steps()}
    with open(os.path.join(outdir, 'm.case.json'), 'w') as f:
        json.dump(case, f, indent=1)


if __name__ == '__main__':
    main()
