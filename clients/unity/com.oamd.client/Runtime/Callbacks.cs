// Callbacks: where the client runs the game's code (events, tool handlers, cancellations). One rule:
// a SynchronizationContext if there is one (Unity's main thread), else a MainThreadQueue. A callback that
// throws is reported through OnError and costs that one callback, never the reader thread. It counts the
// callbacks posted to the context and not yet run, so a reply read after them can wait for them (CatchUp).

using System;
using System.Threading;
using System.Threading.Tasks;

namespace Oamd
{
    sealed class Callbacks
    {
        readonly SynchronizationContext _context;
        readonly MainThreadQueue _queue;
        readonly Action<Exception> _onError;
        int _waiting;  // posted to the context, not yet run

        public Callbacks(SynchronizationContext context, MainThreadQueue queue, Action<Exception> onError)
        {
            _context = context;
            _queue = queue;
            _onError = onError;
        }

        public void Post(Action action)
        {
            Action contained = () =>
            {
                try { action(); }
                catch (Exception ex) { _onError(ex); }
            };
            if (_context != null) ToContext(contained);
            else _queue.Post(contained);
        }

        /// <summary>Starts <paramref name="work"/> on the callback thread; its task, or its exception as a task.</summary>
        public Task<T> Run<T>(Func<Task<T>> work)
        {
            var started = new TaskCompletionSource<Task<T>>(TaskCreationOptions.RunContinuationsAsynchronously);
            Action start = () =>
            {
                try { started.TrySetResult(work()); }
                catch (Exception ex) { started.TrySetException(ex); }
            };
            if (_context != null) ToContext(start);
            else _queue.Post(start);
            return started.Task.Unwrap();
        }

        void ToContext(Action action)
        {
            Interlocked.Increment(ref _waiting);
            _context.Post(_ =>
            {
                Interlocked.Decrement(ref _waiting);
                action();
            }, null);
        }

        /// <summary>True while callbacks posted to the context have not started.</summary>
        public bool Waiting
        {
            get { return _context != null && Volatile.Read(ref _waiting) > 0; }
        }

        /// <summary>Completes, on a pool thread, once the callbacks posted to the context so far have run.</summary>
        public Task CatchUp()
        {
            var caught = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
            _context.Post(_ => caught.TrySetResult(true), null);
            return caught.Task;
        }
    }
}
