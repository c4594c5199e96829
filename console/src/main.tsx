import { render, type JSX } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import './style.css';
import { href, onLinkClick, useRoute } from './router.ts';
import { signOut, signedIn } from './session.ts';
import { SignIn } from './views/SignIn.tsx';
import { Collections } from './views/Collections.tsx';
import { ClassObjects } from './views/ClassObjects.tsx';
import { ObjectDetail } from './views/ObjectDetail.tsx';
import { Audit } from './views/Audit.tsx';
import { Tasks } from './views/Tasks.tsx';
import { TaskDetail } from './views/TaskDetail.tsx';
import { Deliveries } from './views/Deliveries.tsx';
import { Search } from './views/Search.tsx';
import { loadAccess, resetAccess } from './access.ts';
import { Sinks, SinkDetail } from './views/Sinks.tsx';
import { Subscriptions } from './views/Subscriptions.tsx';
import { Users, UserDetail } from './views/Users.tsx';
import { Groups, GroupDetail } from './views/Groups.tsx';
import { MyTokens } from './views/Tokens.tsx';

function App() {
  const route = useRoute();
  const [authed, setAuthed] = useState(signedIn());
  // A 401 anywhere forgets the token (session.ts); views call this to show the sign-in form again.
  const recheck = () => {
    resetAccess();
    setAuthed(signedIn());
  };
  // Admin-only views are hidden (not merely refused) for everyone else; null while unknown.
  const [admin, setAdmin] = useState<boolean | null>(null);

  useEffect(() => {
    document.title = authed ? 'Inventory console' : 'Sign in · Inventory console';
    setAdmin(null);
    if (authed)
      loadAccess().then(
        (a) => setAdmin(a.admin),
        () => {
          if (!signedIn()) recheck();
        },
      );
  }, [authed]);

  if (!authed) return <SignIn onSignedIn={recheck} />;
  return (
    <div class="shell" onClick={onLinkClick}>
      <header class="top">
        <a class="brand" href={href({ view: 'collections' })}>
          Inventory console
        </a>
        <nav aria-label="Main">
          <a href={href({ view: 'collections' })}>Collections</a>
          <a href={href({ view: 'search' })}>Search</a>
          <a href={href({ view: 'tasks' })}>Tasks</a>
          <a href={href({ view: 'audit' })}>Audit events</a>
          <a href={href({ view: 'my-tokens' })}>My tokens</a>
          {admin && (
            <span class="nav-admin" role="group" aria-label="Administration">
              <a href={href({ view: 'deliveries' })}>Delivery health</a>
              <a href={href({ view: 'sinks' })}>Event sinks</a>
              <a href={href({ view: 'subscriptions' })}>Subscriptions</a>
              <a href={href({ view: 'users' })}>Users</a>
              <a href={href({ view: 'groups' })}>Groups</a>
            </span>
          )}
        </nav>
        <button type="button" onClick={() => void signOut().then(recheck)}>
          Sign out
        </button>
      </header>
      <main id="main">
        {route.view === 'collections' && <Collections onAuthLost={recheck} />}
        {route.view === 'class' && <ClassObjects key={route.classId} classId={route.classId} onAuthLost={recheck} />}
        {route.view === 'object' && (
          <ObjectDetail key={`${route.classId}/${route.objectId}`} classId={route.classId} objectId={route.objectId} onAuthLost={recheck} />
        )}
        {route.view === 'audit' && <Audit onAuthLost={recheck} />}
        {route.view === 'tasks' && <Tasks onAuthLost={recheck} />}
        {route.view === 'task' && <TaskDetail key={route.taskId} taskId={route.taskId} onAuthLost={recheck} />}
        {route.view === 'search' && <Search onAuthLost={recheck} />}
        {route.view === 'deliveries' &&
          (admin ? (
            <Deliveries onAuthLost={recheck} />
          ) : (
            <section>
              <h1>Delivery health</h1>
              <p>{admin === null ? 'Loading…' : 'Only administrators see delivery health.'}</p>
            </section>
          ))}
        {route.view === 'my-tokens' && <MyTokens onAuthLost={recheck} />}
        {route.view === 'sinks' && adminOnly(admin, 'Event sinks', <Sinks onAuthLost={recheck} />)}
        {route.view === 'sink' &&
          adminOnly(admin, 'Event sink', <SinkDetail key={route.sinkId} sinkId={route.sinkId} onAuthLost={recheck} />)}
        {route.view === 'subscriptions' && adminOnly(admin, 'Event subscriptions', <Subscriptions onAuthLost={recheck} />)}
        {route.view === 'users' && adminOnly(admin, 'Users', <Users onAuthLost={recheck} />)}
        {route.view === 'user' && adminOnly(admin, 'User', <UserDetail key={route.userId} userId={route.userId} onAuthLost={recheck} />)}
        {route.view === 'groups' && adminOnly(admin, 'Groups', <Groups onAuthLost={recheck} />)}
        {route.view === 'group' &&
          adminOnly(admin, 'Group', <GroupDetail key={route.groupId} groupId={route.groupId} onAuthLost={recheck} />)}
        {route.view === 'not-found' && (
          <section>
            <h1>Not found</h1>
            <p>The console has no page at {route.path}.</p>
          </section>
        )}
      </main>
    </div>
  );
}

/** An administration view for administrators; for everyone else only a note (the view is not offered). */
function adminOnly(admin: boolean | null, title: string, view: JSX.Element) {
  if (admin) return view;
  return (
    <section>
      <h1>{title}</h1>
      <p>{admin === null ? 'Loading…' : 'Only administrators see this page.'}</p>
    </section>
  );
}

render(<App />, document.getElementById('app')!);
