// A main thread for the console programs that play the engine's part (Scenario.cs, Tavern.cs, WaitForModel.cs): a
// single-threaded SynchronizationContext as Unity's UnitySynchronizationContext, whose Post queues and
// whose thread runs the queue, so callbacks and the continuations of awaits run where a game's would.

using System;
using System.Collections.Concurrent;
using System.Collections.Generic;
using System.Threading;
using System.Threading.Tasks;

static class MainLoop
{
    public static int ThreadId { get; private set; }

    sealed class LoopContext : SynchronizationContext
    {
        readonly BlockingCollection<KeyValuePair<SendOrPostCallback, object>> _work =
            new BlockingCollection<KeyValuePair<SendOrPostCallback, object>>();

        public override void Post(SendOrPostCallback d, object state)
        {
            try { _work.Add(new KeyValuePair<SendOrPostCallback, object>(d, state)); }
            catch (InvalidOperationException) { /* the program is ending; as Unity after play mode */ }
        }

        public void RunUntil(Task task)
        {
            task.ContinueWith(_ => _work.CompleteAdding(), TaskScheduler.Default);
            foreach (var item in _work.GetConsumingEnumerable()) item.Key(item.Value);
        }
    }

    /// <summary>Runs <paramref name="body"/> on this thread as the main thread until it completes.</summary>
    public static void Run(Func<Task> body)
    {
        ThreadId = Thread.CurrentThread.ManagedThreadId;
        var context = new LoopContext();
        var previous = SynchronizationContext.Current;
        SynchronizationContext.SetSynchronizationContext(context);
        try
        {
            Task task = body();
            context.RunUntil(task);
            task.GetAwaiter().GetResult();
        }
        finally
        {
            SynchronizationContext.SetSynchronizationContext(previous);
        }
    }

    public static bool OnMainThread
    {
        get { return Thread.CurrentThread.ManagedThreadId == ThreadId; }
    }
}
