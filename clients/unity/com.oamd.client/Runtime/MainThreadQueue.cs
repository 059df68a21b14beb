// MainThreadQueue: callbacks waiting for the thread that drains it. Unity's main thread has a
// SynchronizationContext and needs none of this; the queue is for everything else (a client made on a
// worker thread, edit-mode tools, a console program) and for games that want callbacks at one known
// point of the frame: call Pump() from Update (or add the OamdPump component).

using System;
using System.Collections.Generic;
using System.Threading;

namespace Oamd
{
    public sealed class MainThreadQueue
    {
        readonly Queue<Action> _items = new Queue<Action>();
        readonly object _gate = new object();

        /// <summary>Callbacks waiting.</summary>
        public int Count
        {
            get { lock (_gate) return _items.Count; }
        }

        /// <summary>Queues <paramref name="action"/>; safe from any thread, never blocks on the pump.</summary>
        public void Post(Action action)
        {
            lock (_gate)
            {
                _items.Enqueue(action);
                Monitor.PulseAll(_gate);
            }
        }

        /// <summary>Runs the callbacks queued before this call, on the calling thread, and returns how many
        /// ran. Callbacks they queue wait for the next Pump, so one frame's work stays bounded.</summary>
        public int Pump()
        {
            Action[] batch;
            lock (_gate)
            {
                batch = _items.ToArray();
                _items.Clear();
            }
            foreach (var action in batch) action();
            return batch.Length;
        }

        /// <summary>Waits up to <paramref name="timeout"/> for a callback, then pumps: the loop of a
        /// program whose main thread does nothing else.</summary>
        public int Pump(TimeSpan timeout)
        {
            lock (_gate)
            {
                if (_items.Count == 0) Monitor.Wait(_gate, timeout);
            }
            return Pump();
        }
    }
}
