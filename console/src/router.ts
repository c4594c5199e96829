// A small history router under /console (the service answers every /console/* path with index.html).
import { useEffect, useState } from 'preact/hooks';

export const BASE = '/console';

export type Route =
  | { view: 'collections' }
  | { view: 'class'; classId: number }
  | { view: 'object'; classId: number; objectId: number }
  | { view: 'audit' }
  | { view: 'tasks' }
  | { view: 'task'; taskId: number }
  | { view: 'deliveries' }
  | { view: 'search' }
  | AdminRoute
  | { view: 'not-found'; path: string };

/** The administration views (under /console/admin) and the caller's own tokens (/console/tokens). */
export type AdminRoute =
  | { view: 'sinks' }
  | { view: 'sink'; sinkId: number }
  | { view: 'subscriptions' }
  | { view: 'users' }
  | { view: 'user'; userId: number }
  | { view: 'groups' }
  | { view: 'group'; groupId: number }
  | { view: 'my-tokens' };

const ADMIN_LISTS = { sinks: 'sink', users: 'user', groups: 'group' } as const;

function parseAdminRoute(parts: string[]): AdminRoute | null {
  if (parts.length === 1 && parts[0] === 'tokens') return { view: 'my-tokens' };
  if (parts[0] !== 'admin') return null;
  const [, list, id, ...more] = parts;
  if (more.length > 0 || list === undefined) return null;
  if (list === 'subscriptions') return id === undefined ? { view: 'subscriptions' } : null;
  if (list !== 'sinks' && list !== 'users' && list !== 'groups') return null;
  if (id === undefined) return { view: list };
  const n = Number(id);
  if (!Number.isInteger(n) || n <= 0) return null;
  const one = ADMIN_LISTS[list];
  return one === 'sink' ? { view: one, sinkId: n } : one === 'user' ? { view: one, userId: n } : { view: one, groupId: n };
}

function adminHref(route: AdminRoute): string {
  switch (route.view) {
    case 'my-tokens':
      return `${BASE}/tokens`;
    case 'sink':
      return `${BASE}/admin/sinks/${route.sinkId}`;
    case 'user':
      return `${BASE}/admin/users/${route.userId}`;
    case 'group':
      return `${BASE}/admin/groups/${route.groupId}`;
    default:
      return `${BASE}/admin/${route.view}`;
  }
}

export function parseRoute(pathname: string): Route {
  const rest = pathname.startsWith(BASE) ? pathname.slice(BASE.length) : pathname;
  const parts = rest.split('/').filter(Boolean);
  if (parts.length === 0 || (parts.length === 1 && parts[0] === 'collections')) return { view: 'collections' };
  if (parts.length === 1 && (parts[0] === 'audit' || parts[0] === 'tasks' || parts[0] === 'deliveries' || parts[0] === 'search'))
    return { view: parts[0] };
  if (parts[0] === 'tasks' && parts.length === 2) {
    const taskId = Number(parts[1]);
    if (Number.isInteger(taskId) && taskId > 0) return { view: 'task', taskId };
  }
  const admin = parseAdminRoute(parts);
  if (admin) return admin;
  if (parts[0] === 'classes' && parts.length >= 2) {
    const classId = Number(parts[1]);
    if (Number.isInteger(classId) && classId > 0) {
      if (parts.length === 2) return { view: 'class', classId };
      const objectId = Number(parts[3]);
      if (parts.length === 4 && parts[2] === 'objects' && Number.isInteger(objectId) && objectId > 0)
        return { view: 'object', classId, objectId };
    }
  }
  return { view: 'not-found', path: pathname };
}

export function href(route: Exclude<Route, { view: 'not-found' }>): string {
  switch (route.view) {
    case 'collections':
      return `${BASE}/`;
    case 'class':
      return `${BASE}/classes/${route.classId}`;
    case 'object':
      return `${BASE}/classes/${route.classId}/objects/${route.objectId}`;
    case 'task':
      return `${BASE}/tasks/${route.taskId}`;
    case 'sinks':
    case 'sink':
    case 'subscriptions':
    case 'users':
    case 'user':
    case 'groups':
    case 'group':
    case 'my-tokens':
      return adminHref(route);
    default:
      return `${BASE}/${route.view}`;
  }
}

export function navigate(to: string): void {
  window.history.pushState(null, '', to);
  window.dispatchEvent(new PopStateEvent('popstate'));
}

/** Same-origin link clicks under /console go through the router instead of reloading the page. */
export function onLinkClick(e: MouseEvent): void {
  if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
  const a = (e.target as Element | null)?.closest('a');
  if (!a || a.origin !== window.location.origin || !a.pathname.startsWith(BASE)) return;
  e.preventDefault();
  navigate(a.pathname + a.search);
}

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(window.location.pathname));
  useEffect(() => {
    const on = () => setRoute(parseRoute(window.location.pathname));
    window.addEventListener('popstate', on);
    return () => window.removeEventListener('popstate', on);
  }, []);
  return route;
}
