// The neighbourhood of an object (getRelatedObjectGraph, objects of its own class included) drawn
// as inline SVG: the object in the middle, each further hop on a wider ring, relations as lines,
// every other object a labelled link (keyboard reachable; Enter opens it). A visually hidden list
// says the same in words for screen readers. No inline styles (the console's CSP is self-only).
import { useEffect, useState } from 'preact/hooks';
import type { Schemas } from '../../../clients/typescript/index.ts';
import { inv } from '../session.ts';
import { href, navigate } from '../router.ts';
import { ErrorText, useError } from '../ui.tsx';

type Graph = Schemas['ObjectGraph'];
type Node = Schemas['GraphObject'];
const RING = 130;
const MARGIN = 90;
const LABEL_MAX = 18;

interface Placed {
  node: Node;
  x: number;
  y: number;
  angle: number;
}

/** A radial layout: depth d on a ring of radius d·RING; each ring ordered by the angle of the node's parent on the ring before. */
export function layout(graph: Graph): { placed: Map<number, Placed>; size: number } {
  const placed = new Map<number, Placed>();
  const maxDepth = Math.max(0, ...graph.objects.map((o) => o.depth));
  const half = maxDepth * RING + MARGIN;
  for (let d = 0; d <= maxDepth; d++) {
    const ring = graph.objects.filter((o) => o.depth === d);
    const parentAngle = (o: Node) => placed.get(o.path[o.path.length - 2] ?? -1)?.angle ?? 0;
    ring.sort((a, b) => parentAngle(a) - parentAngle(b) || a.id - b.id);
    ring.forEach((node, i) => {
      const angle = d === 0 ? 0 : -Math.PI / 2 + (2 * Math.PI * i) / ring.length;
      const r = d * RING;
      placed.set(node.id, { node, angle, x: Math.round(half + r * Math.cos(angle)), y: Math.round(half + r * Math.sin(angle)) });
    });
  }
  return { placed, size: 2 * half };
}

const short = (s: string) => (s.length > LABEL_MAX ? `${s.slice(0, LABEL_MAX - 1)}…` : s);

export function RelationGraph({
  classId,
  objectId,
  version,
  onAuthLost,
}: {
  classId: number;
  objectId: number;
  /** Changes whenever the object's relations changed, to draw the graph again. */
  version: number;
  onAuthLost: () => void;
}) {
  const [depth, setDepth] = useState(1);
  const [graph, setGraph] = useState<Graph | null>(null);
  const [classNames, setClassNames] = useState<Map<number, string>>(new Map());
  const [error, setError, fail] = useError(onAuthLost);

  useEffect(() => {
    let live = true;
    setError(null);
    inv
      .call('getRelatedObjectGraph', {
        params: { path: { class_id: classId, object_id: objectId }, query: { depth, ignore_self_class: false } },
      })
      .then(
        async (g) => {
          const names = new Map(classNames);
          for (const id of new Set(g.objects.map((o) => o.svc_class_id)))
            if (!names.has(id))
              await inv.call('getClass', { params: { path: { class_id: id } } }).then(
                (k) => names.set(id, k.name),
                () => undefined,
              );
          if (!live) return;
          setClassNames(names);
          setGraph(g);
        },
        (e: unknown) => {
          if (live) fail(e);
        },
      );
    return () => {
      live = false;
    };
  }, [classId, objectId, depth, version]);

  const { placed, size } = graph ? layout(graph) : { placed: new Map<number, Placed>(), size: 0 };
  const nameOf = (id: number) => placed.get(id)?.node.name ?? `object ${id}`;
  const describe = (n: Node) =>
    `${n.name}${classNames.has(n.svc_class_id) ? `, ${classNames.get(n.svc_class_id)}` : ''}, ${n.depth} hop${n.depth === 1 ? '' : 's'} away`;

  return (
    <section class="graph-section" aria-labelledby="graph-heading">
      <h2 id="graph-heading">Neighbourhood</h2>
      <div class="filter">
        <label for="graph-depth">Hops shown</label>
        <select id="graph-depth" value={String(depth)} onChange={(e) => setDepth(Number(e.currentTarget.value))}>
          {[1, 2, 3].map((d) => (
            <option key={d} value={String(d)}>
              {d}
            </option>
          ))}
        </select>
        <span class="muted" role="status">
          {graph
            ? `${graph.objects.length - 1} related object${graph.objects.length === 2 ? '' : 's'}, ${graph.relations.length} relation${graph.relations.length === 1 ? '' : 's'}`
            : error
              ? ''
              : 'Loading…'}
        </span>
      </div>
      <ErrorText error={error} />
      {graph && (
        <>
          <svg
            class="graph"
            viewBox={`0 0 ${size} ${size}`}
            role="group"
            aria-label={`Relation graph around ${nameOf(objectId)}`}
            aria-describedby="graph-text"
          >
            <g class="edges" aria-hidden="true">
              {graph.relations.map((r) => {
                const a = placed.get(r.from_object_id);
                const b = placed.get(r.to_object_id);
                return a && b ? <line key={r.id} data-relation-id={r.id} x1={a.x} y1={a.y} x2={b.x} y2={b.y} /> : null;
              })}
            </g>
            {[...placed.values()].map(({ node, x, y }) =>
              node.id === objectId ? (
                <g key={node.id} class="node root" data-object-id={node.id} aria-label={`${node.name} (this object)`} role="img">
                  <circle cx={x} cy={y} r={14} />
                  <text x={x} y={y + 32}>
                    {short(node.name)}
                  </text>
                </g>
              ) : (
                <a
                  key={node.id}
                  class="node"
                  data-object-id={node.id}
                  href={href({ view: 'object', classId: node.svc_class_id, objectId: node.id })}
                  aria-label={describe(node)}
                  onClick={(e) => {
                    e.preventDefault();
                    navigate(href({ view: 'object', classId: node.svc_class_id, objectId: node.id }));
                  }}
                >
                  <title>{describe(node)}</title>
                  <circle cx={x} cy={y} r={10} />
                  <text x={x} y={y + 28}>
                    {short(node.name)}
                  </text>
                </a>
              ),
            )}
          </svg>
          <div id="graph-text" class="visually-hidden">
            <p>
              {graph.objects.length - 1} objects within {depth} hop{depth === 1 ? '' : 's'} of {nameOf(objectId)}.
            </p>
            <ul aria-label="Relations in the graph">
              {graph.relations.map((r) => (
                <li key={r.id}>
                  {nameOf(r.from_object_id)} is related to {nameOf(r.to_object_id)}
                </li>
              ))}
            </ul>
          </div>
        </>
      )}
    </section>
  );
}
