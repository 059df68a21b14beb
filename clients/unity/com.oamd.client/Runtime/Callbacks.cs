// Callbacks: where the client runs the game's code (events, tool handlers, cancellations). One rule:
// a SynchronizationContext if there is one (Unity's main thread), else a MainThreadQueue. A callback that
// throws is reported through OnError and costs that one callback, never the reader thread.

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
            if (_context != null) _context.Post(_ => contained(), null);
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
            if (_context != null) _context.Post(_ => start(), null);
            else _queue.Post(start);
            return started.Task.Unwrap();
        }
    }
}
